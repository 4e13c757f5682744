"""Stand-ins for LivePortrait, which the expression restorer and the face editor share.

- feature extractor (1×3×256×256 RGB 0..1 → 1×32×16×64×64): the crop itself, stored in the volume.
- motion extractor (→ pitch, yaw, roll as scalars, scale 1×1, translation 1×3, expression 1×21×3,
  motion points 1×21×3): the expression is a fixed pattern times the crop's mean brightness (within
  LivePortrait's limits), so the expression of another frame or face differs.
- generator (feature volume, source and target motion points → 1×3×512×512): the stored crop, twice
  the size, tinted by how far the source motion points are from the target's: the restorer's two
  frames, or the editor's edits, show in the pixels.
- eye and lip retargeters (1×66, 1×65 → 1×63): a small offset from the eye and lip ratios.
- stitcher (source, target → 1×21×3): the source points, moved a tenth towards the target's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fleetctl.harness.standins.graph import Graph

CROP = 256
VOLUME = (1, 32, 16, 64, 64)
POINTS = (1, 21, 3)
_rng = np.random.default_rng(13)
EXPRESSION = (_rng.uniform(-1, 1, size=POINTS) * 0.02).astype(np.float32)
MOTION_POINTS = _rng.uniform(-0.5, 0.5, size=POINTS).astype(np.float32)
# Motion (63 values) to a per-channel tint of the generated crop.
TINT = (_rng.normal(size=(63, 3)) * 2.0).astype(np.float32)


def feature_extractor(path: Path) -> None:
    graph = Graph({"input": (1, 3, CROP, CROP)})
    flat = graph.op("Reshape", ["input", graph.ints([1, 3 * CROP * CROP])])
    padded = graph.op("Pad", [flat, graph.ints([0, 0, 0, int(np.prod(VOLUME)) - 3 * CROP * CROP])])
    graph.output("output", graph.op("Reshape", [padded, graph.ints(list(VOLUME))]), VOLUME)
    graph.save(path)


def motion_extractor(path: Path) -> None:
    graph = Graph({"input": (1, 3, CROP, CROP)})
    brightness = graph.mean("input", [0, 1, 2, 3], keepdims=0)  # a scalar
    for name in ("pitch", "yaw", "roll"):
        graph.output(name, graph.tied(0.0, "input"), ())
    graph.output("scale", graph.tied(np.ones((1, 1)), "input"), (1, 1))
    graph.output("translation", graph.tied(np.zeros((1, 3)), "input"), (1, 3))
    graph.output("expression", graph.op("Mul", [graph.const(EXPRESSION), brightness]), POINTS)
    graph.output("motion_points", graph.tied(MOTION_POINTS, "input"), POINTS)
    graph.save(path)


def generator(path: Path) -> None:
    graph = Graph({"feature_volume": VOLUME, "source": POINTS, "target": POINTS})
    flat = graph.op("Reshape", ["feature_volume", graph.ints([1, int(np.prod(VOLUME))])])
    crop = graph.op("Slice", [flat, graph.ints([0]), graph.ints([3 * CROP * CROP]), graph.ints([1])])
    image = graph.op("Reshape", [crop, graph.ints([1, 3, CROP, CROP])])
    larger = graph.op("Resize", [image, "", graph.const([1.0, 1.0, 2.0, 2.0])], mode="linear")
    motion = graph.op("Reshape", [graph.op("Sub", ["source", "target"]), graph.ints([1, 63])])
    tint = graph.op("Reshape", [graph.op("MatMul", [motion, graph.const(TINT)]), graph.ints([1, 3, 1, 1])])
    graph.output("output", graph.op("Add", [larger, tint]), (1, 3, 2 * CROP, 2 * CROP))
    graph.save(path)


def retargeter(path: Path, width: int) -> None:
    graph = Graph({"input": (1, width)})
    ratios = graph.op("Slice", ["input", graph.ints([63]), graph.ints([width]), graph.ints([1])])
    offset = graph.op("ReduceSum", [ratios, graph.ints([1])], keepdims=1)  # 1×1
    points = graph.op("Mul", [graph.const(np.full((1, 63), 0.01)), offset])
    graph.output("output", points, (1, 63))
    graph.save(path)


def stitcher(path: Path) -> None:
    graph = Graph({"source": POINTS, "target": POINTS})
    towards = graph.op("Mul", [graph.op("Sub", ["target", "source"]), graph.const(0.1)])
    graph.output("output", graph.op("Add", ["source", towards]), POINTS)
    graph.save(path)


def build(models: Path) -> None:
    feature_extractor(models / "live_portrait_feature_extractor.onnx")
    motion_extractor(models / "live_portrait_motion_extractor.onnx")
    generator(models / "live_portrait_generator.onnx")
    retargeter(models / "live_portrait_eye_retargeter.onnx", 66)
    retargeter(models / "live_portrait_lip_retargeter.onnx", 65)
    stitcher(models / "live_portrait_stitcher.onnx")
