"""Stand-ins for the other processors' models, each visibly different from the swappers' (so a chain shows
every step) and each showing what it was given.

- fran (age modifier; target 1×3×1024×1024 RGB 0..1, direction 2): the crop darkened by the
  difference between the two ages it is given (the face's age and the wanted one).
- modnet (background remover; 1×3×512×512, -1..1 → 1×1×512×512): the matte is the faceness
  (R − B), so the faces stay and the rest takes the fill colour.
- gfpgan_1.4 (face enhancer; 1×3×512×512, -1..1): the crop's channels rotated (R, G, B → G, B, R).
- ddcolor (frame colorizer; 1×3×H×W grey RGB 0..1 → 1×2×H×W): a/b channels that follow the
  brightness (warm highlights, cool shadows).
- span_kendata_x4 (frame enhancer; 1×3×128×128 tiles → 1×3×512×512): each tile four times larger
  (nearest), red and green exchanged.
- wav2lip_gan_96 (lip syncer; mel 1×1×80×16, face 1×6×96×96 → 1×3×96×96): the face with its lower
  half brightened by the index of the loudest mel band at the window's end: the audio window a frame
  was given shows in its mouth (with the harness's voice, another window gives another mouth).
- kim_vocal_2 (voice extractor; N×4×3072×256): the input unchanged (all of the audio is voice).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto

from fleetctl.harness.standins.graph import Graph

FRAN = 1024
ENHANCER_TILE, ENHANCER_SCALE = 128, 4
LIP = 96
MOUTH_PER_BAND = 0.5 / 80  # the mouth's brightening for each mel band (of 80) up to the loudest


def age_modifier(path: Path) -> None:
    shape = (1, 3, FRAN, FRAN)
    graph = Graph({"target": shape, "direction": (2,)})
    older = graph.op("Sub", [graph.channel("direction", 1, axis=0), graph.channel("direction", 0, axis=0)])
    factor = graph.op("Sub", [graph.const([1.0]), graph.op("Abs", [older])])
    graph.output("output", graph.op("Mul", ["target", factor]), shape)
    graph.save(path)


def background_remover(path: Path) -> None:
    graph = Graph({"input": (1, 3, 512, 512)})  # RGB, -1..1
    difference = graph.op("Sub", [graph.channel("input", 0), graph.channel("input", 2)])
    graph.output("output", graph.clip(graph.scale(difference, 2.0), 0.0, 1.0), (1, 1, 512, 512))
    graph.save(path)


def face_enhancer(path: Path) -> None:
    shape = (1, 3, 512, 512)
    graph = Graph({"input": shape})
    graph.output("output", graph.op("Gather", ["input", graph.ints([1, 2, 0])], axis=1), shape)
    graph.save(path)


def frame_colorizer(path: Path) -> None:
    graph = Graph({"input": (1, 3, "height", "width")})
    brightness = graph.scale(graph.mean("input", [1]), 1.0, -0.5)  # 1×1×H×W, -0.5..0.5
    a = graph.op("Mul", [brightness, graph.const(60.0)])
    b = graph.op("Mul", [brightness, graph.const(-40.0)])
    graph.output("output", graph.op("Concat", [a, b], axis=1), (1, 2, "height", "width"))
    graph.save(path)


def frame_enhancer(path: Path) -> None:
    side = ENHANCER_TILE * ENHANCER_SCALE
    graph = Graph({"input": (1, 3, ENHANCER_TILE, ENHANCER_TILE)})
    scales = graph.const([1.0, 1.0, float(ENHANCER_SCALE), float(ENHANCER_SCALE)])
    larger = graph.op("Resize", ["input", "", scales], mode="nearest")
    graph.output("output", graph.op("Gather", [larger, graph.ints([1, 0, 2])], axis=1), (1, 3, side, side))
    graph.save(path)


def lip_syncer(path: Path) -> None:
    """The mouth brightened by which mel band is loudest at the end of the window it was given: with the
    harness's voice (benchmarks.parity.clips.write_voice, a tone whose pitch jumps every video frame) each
    frame's window ends on another band, so a frame given its neighbour's window shows another mouth."""
    graph = Graph({"source": (1, 1, 80, 16), "target": (1, 6, LIP, LIP)})
    face = graph.op("Slice", ["target", graph.ints([3]), graph.ints([6]), graph.ints([1])])  # the unmasked crop
    last = graph.op("Slice", ["source", graph.ints([15]), graph.ints([16]), graph.ints([3])])  # 1×1×80×1
    band = graph.op("Cast", [graph.op("ArgMax", [last], axis=2, keepdims=0)], to=TensorProto.FLOAT)  # 1×1×1
    energy = graph.scale(band, MOUTH_PER_BAND)  # 0..0.5: up to 127 levels
    lower = np.zeros((1, 1, LIP, 1), np.float32)
    lower[:, :, LIP // 2 :] = 1.0
    mouth = graph.op("Mul", [graph.const(lower), graph.op("Reshape", [energy, graph.ints([1, 1, 1, 1])])])
    graph.output("output", graph.op("Add", [face, mouth]), (1, 3, LIP, LIP))
    graph.save(path)


def voice_extractor(path: Path) -> None:
    shape = ("chunks", 4, 3072, 256)
    graph = Graph({"input": shape})
    graph.output("output", graph.op("Identity", ["input"]), shape)
    graph.save(path)


def build(models: Path) -> None:
    age_modifier(models / "fran.onnx")
    background_remover(models / "modnet.onnx")
    face_enhancer(models / "gfpgan_1.4.onnx")
    frame_colorizer(models / "ddcolor.onnx")
    frame_enhancer(models / "span_kendata_x4.onnx")
    lip_syncer(models / "wav2lip_gan_96.onnx")
    voice_extractor(models / "kim_vocal_2.onnx")
