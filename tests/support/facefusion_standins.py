"""Stand-in ONNX models for FaceFusion 3.8.1, built with the `onnx` package at test time.

Run by FaceFusion's own interpreter (it has `onnx`; the project's does not):
    python facefusion_standins.py MODELS_DIR '{"box": [x0, y0, x1, y1]}'
It writes every model FaceFusion's default face_swapper pipeline loads, each with the `.hash` file
(zlib CRC-32 of the file, 8 hex digits) FaceFusion's download.validate_hash checks, so its real
pipeline runs on the CPU without downloading anything. Inputs and outputs have the real models'
fixed shapes (yoloface 1×3×640×640 → 1×20×8400, 2dfan4 1×3×256×256, arcface 1×3×112×112 → 1×512,
inswapper 1×3×128×128 with a 1×512 source, hyperswap 1×3×256×256), so FaceFusion feeding a model
anything else fails here as it would on the real one. What they compute:

- detector (yolo_face): one face at `box` (frame pixels, frames up to 640 px), its score the mean
  brightness of that box: a bright patch is a face, a dark frame has none.
- landmarkers (2dfan4, fan_68_5), recogniser (arcface), classifier (fairface): fixed outputs.
- swappers (hyperswap_1a_256, inswapper_128): the face region comes back with its colours inverted
  (255 - value), which a test can recognise. inswapper_128 carries, as the real one does, a 512×512
  matrix as its graph's last initializer, which FaceFusion reads to convert the source embedding.
- content analyser (nsfw_1..3): flags a frame only when it is mostly red (R - G, un-normalised).
- occluder (xseg_1) and parser (bisenet_resnet_34): keep the whole face.

Only stdlib, numpy and onnx here: this file runs outside the project's environment.
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
FLOAT = TensorProto.FLOAT

# Where the five points sit in the detected box, as fractions of its width and height.
FIVE_POINTS = ((0.33, 0.40), (0.67, 0.40), (0.50, 0.58), (0.37, 0.78), (0.63, 0.78))
# nsfw_2 and nsfw_3's preprocessing (content_analyser.create_static_model_set); nsfw_1 has none.
ANALYSER_NORMALISATION = {
    "nsfw_1": ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
    "nsfw_2": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    "nsfw_3": ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
}


# nsfw_1..3's input sides (content_analyser.create_static_model_set's sizes).
ANALYSER_SIZE = {"nsfw_1": 640, "nsfw_2": 384, "nsfw_3": 448}
YOLO_CANDIDATES = 8400  # yoloface_8n's anchors at 640×640
EMBEDDING = 512  # arcface's embedding: what the recogniser gives and the swappers take

Shape = tuple[int, ...]


class Graph:
    """A tiny builder: named constants and nodes, float inputs of fixed shapes."""

    def __init__(self, inputs: dict[str, Shape]) -> None:
        self.inputs = [helper.make_tensor_value_info(name, FLOAT, list(shape)) for name, shape in inputs.items()]
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.outputs: list[Any] = []
        self._count = 0

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count}"

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        name = self.name("const")
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attributes: Any) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attributes))
        return out

    def zero_of(self, name: str) -> str:
        """0 that depends on `name`, so no output is a constant folded away from the input."""
        return self.op("Mul", [self.op("ReduceMean", [name], keepdims=0), self.const(0.0)])

    def tied(self, value: Any, to: str) -> str:
        return self.op("Add", [self.const(value), self.zero_of(to)])

    def expanded(self, value: Any, shape: Shape, to: str) -> str:
        """`value` broadcast to `shape` (a large constant output without a large constant)."""
        return self.op("Expand", [self.tied(value, to), self.const(list(shape), np.int64)])

    def output(self, name: str, value: str, shape: Shape | int, dtype: Any = FLOAT) -> None:
        """`shape`: the real model's; a rank alone where it is not known (free dimensions)."""
        dims: list[Any] = [f"{name}_{axis}" for axis in range(shape)] if isinstance(shape, int) else list(shape)
        self.nodes.append(helper.make_node("Identity", [value], [name]))
        self.outputs.append(helper.make_tensor_value_info(name, dtype, dims))

    def save(self, path: Path) -> None:
        graph = helper.make_graph(self.nodes, path.stem, self.inputs, self.outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        # Shape inference checks every node against the declared input and output shapes.
        onnx.checker.check_model(onnx.shape_inference.infer_shapes(model, strict_mode=True))
        onnx.save(model, str(path))
        path.with_suffix(".hash").write_text(format(zlib.crc32(path.read_bytes()), "08x"))


def unit_landmarks_68() -> np.ndarray:
    """68 points in a box's unit square, consistent with FIVE_POINTS where FaceFusion reads them."""
    points = np.zeros((68, 2), dtype=np.float32)
    for index, angle in enumerate(np.linspace(np.pi, 0, 17)):  # jaw 0..16, level ends: angle 0
        points[index] = (0.5 + 0.45 * np.cos(angle), 0.45 + 0.45 * np.sin(angle))
    points[17:27] = [(0.2 + 0.06 * index, 0.30) for index in range(10)]
    points[27:36] = [(0.5, 0.45 + 0.03 * index) for index in range(9)]
    for start, (cx, cy) in ((36, FIVE_POINTS[0]), (42, FIVE_POINTS[1])):
        for offset, angle in enumerate(np.linspace(0, 2 * np.pi, 6, endpoint=False)):
            points[start + offset] = (cx + 0.04 * np.cos(angle), cy + 0.02 * np.sin(angle))
    points[30] = FIVE_POINTS[2]
    for offset, angle in enumerate(np.linspace(np.pi, -np.pi, 20, endpoint=False)):
        points[48 + offset] = (0.5 + 0.13 * np.cos(angle), 0.78 + 0.04 * np.sin(angle))
    points[48], points[54] = FIVE_POINTS[3], FIVE_POINTS[4]
    return points


def detector(path: Path, box: tuple[float, float, float, float]) -> None:
    x0, y0, x1, y1 = box
    graph = Graph({"input": (1, 3, 640, 640)})
    patch = graph.op(
        "Slice",
        ["input", graph.const([int(y0), int(x0)], np.int64), graph.const([int(y1), int(x1)], np.int64),
         graph.const([2, 3], np.int64)],
    )  # fmt: skip
    score = graph.op("Reshape", [graph.op("ReduceMean", [patch], keepdims=0), graph.const([1, 1, 1], np.int64)])
    width, height = x1 - x0, y1 - y0
    head = graph.const(np.array([x0 + width / 2, y0 + height / 2, width, height], np.float32).reshape(1, 4, 1))
    marks = [value for u, v in FIVE_POINTS for value in (x0 + u * width, y0 + v * height, 1.0)]
    tail = graph.const(np.array(marks, np.float32).reshape(1, 15, 1))
    face = graph.op("Concat", [head, score, tail], axis=1)
    # yoloface_8n's 8400 candidates, the face last: FaceFusion tests its kept indices with numpy.any,
    # to which a lone index 0 is no face. The others score 0.
    empty = graph.expanded(np.zeros((1, 20, 1)), (1, 20, YOLO_CANDIDATES - 1), "input")
    graph.output("output", graph.op("Concat", [empty, face], axis=2), (1, 20, YOLO_CANDIDATES))
    graph.save(path)


def landmarker_2dfan4(path: Path, box: tuple[float, float, float, float]) -> None:
    # face_landmarker.detect_with_2dfan4 crops the box scaled to 195 px, centred in 256 px, and
    # reads the points on a 64 px grid; a full heatmap makes its score 1.
    x0, y0, x1, y1 = box
    scale = 195 / max(x1 - x0, y1 - y0)
    unit = unit_landmarks_68()
    crop = np.stack([128 + (unit[:, 0] - 0.5) * (x1 - x0) * scale, 128 + (unit[:, 1] - 0.5) * (y1 - y0) * scale], 1)
    grid = np.concatenate([crop / 256 * 64, np.ones((68, 1))], axis=1).reshape(1, 68, 3)
    graph = Graph({"input": (1, 3, 256, 256)})
    graph.output("landmarks", graph.tied(grid, "input"), (1, 68, 3))
    graph.output("heatmaps", graph.expanded(np.ones((1, 68, 1, 1)), (1, 68, 64, 64), "input"), (1, 68, 64, 64))
    graph.save(path)


def landmarker_68_5(path: Path) -> None:
    graph = Graph({"input": (1, 5, 2)})
    graph.output("output", graph.tied(unit_landmarks_68().reshape(1, 68, 2), "input"), (1, 68, 2))
    graph.save(path)


def recognizer(path: Path) -> None:
    embedding = np.random.default_rng(7).normal(size=(1, EMBEDDING)).astype(np.float32)
    graph = Graph({"input": (1, 3, 112, 112)})
    graph.output("output", graph.tied(embedding, "input"), (1, EMBEDDING))
    graph.save(path)


def classifier(path: Path) -> None:
    graph = Graph({"input": (1, 3, 224, 224)})
    for name, value in (("race_id", 0), ("gender_id", 0), ("age_id", 3)):
        tied = graph.op("Cast", [graph.tied([float(value)], "input")], to=TensorProto.INT64)
        graph.output(name, tied, (1,), TensorProto.INT64)
    graph.save(path)


def analyser(path: Path, model: str) -> None:
    """Score = mean(R - G) of the un-normalised frame - 0.25: > 0 only for a mostly red frame."""
    mean, deviation = ANALYSER_NORMALISATION[model]
    side = ANALYSER_SIZE[model]
    graph = Graph({"input": (1, 3, side, side)})
    channels = graph.op("ReduceMean", ["input"], axes=[0, 2, 3], keepdims=0)  # per channel, RGB
    raw = graph.op(
        "Add", [graph.op("Mul", [channels, graph.const(deviation)]), graph.const(mean)]
    )  # back to 0..1; content_analyser's black padding counts as 0
    red = graph.op("Gather", [raw, graph.const(0, np.int64)])
    green = graph.op("Gather", [raw, graph.const(1, np.int64)])
    score = graph.op("Sub", [graph.op("Sub", [red, green]), graph.const(0.25)])
    column = graph.op("Reshape", [score, graph.const([1, 1], np.int64)])
    # Their outputs' shapes are the stand-ins' own (the real ones are not in FaceFusion's source).
    if model == "nsfw_1":  # detect_with_nsfw_1: max of detection[:, 4:] > 0.2
        out = graph.op("Concat", [graph.const(np.zeros((1, 4))), graph.op("Mul", [column, graph.const(4.0)])], axis=1)
        graph.output("output", graph.op("Reshape", [out, graph.const([1, 5, 1], np.int64)]), 3)
    elif model == "nsfw_2":  # detection[0] - detection[1] > 0.25
        out = graph.op("Concat", [graph.op("Mul", [column, graph.const(4.0)]), graph.const(np.zeros((1, 1)))], axis=1)
        graph.output("output", out, 2)
    else:  # nsfw_3: (detection[2] + detection[3]) - (detection[0] + detection[1]) > 10.5
        scaled = graph.op("Mul", [column, graph.const(20.0)])
        graph.output("output", graph.op("Concat", [graph.const(np.zeros((1, 2))), scaled, scaled], axis=1), 2)
    graph.save(path)


def hyperswap(path: Path) -> None:
    """The target crop, normalised to -1..1 (mean and deviation 0.5), negated: 255 - value once undone."""
    shape = (1, 3, 256, 256)
    graph = Graph({"source": (1, EMBEDDING), "target": shape})
    graph.output("output", graph.op("Add", [graph.op("Neg", ["target"]), graph.zero_of("source")]), shape)
    graph.save(path)


def inswapper(path: Path) -> None:
    """1 - the target crop (0..1, no normalisation), and the real model's embedding map.

    face_swapper.prepare_source_embedding multiplies the source's 512-value embedding by the graph's
    last initializer (model_helper.get_static_model_initializer), which must be 512×512; as in the
    real model, the graph itself does not use it.
    """
    shape = (1, 3, 128, 128)
    graph = Graph({"source": (1, EMBEDDING), "target": shape})
    inverted = graph.op("Sub", [graph.const(np.ones((1, 1, 1, 1))), "target"])
    graph.output("output", graph.op("Add", [inverted, graph.zero_of("source")]), shape)
    rng = np.random.default_rng(11)
    graph.const(rng.normal(size=(EMBEDDING, EMBEDDING)) / np.sqrt(EMBEDDING))  # last: the embedding map
    graph.save(path)


def occluder(path: Path) -> None:
    # xseg takes a channels-last crop and gives a channels-last mask.
    graph = Graph({"input": (1, 256, 256, 3)})
    graph.output("output", graph.expanded(np.ones((1, 1, 1, 1)), (1, 256, 256, 1), "input"), (1, 256, 256, 1))
    graph.save(path)


def parser(path: Path) -> None:
    classes = np.ones((1, 19, 1, 1), np.float32)
    classes[0, 0] = 0.0  # background loses: every pixel is face
    graph = Graph({"input": (1, 3, 512, 512)})
    graph.output("output", graph.expanded(classes, (1, 19, 512, 512), "input"), (1, 19, 512, 512))
    graph.save(path)


def build(models: Path, box: tuple[float, float, float, float]) -> list[str]:
    """Write every stand-in into `models` (FaceFusion's .assets/models); returns the file names."""
    models.mkdir(parents=True, exist_ok=True)
    detector(models / "yoloface_8n.onnx", box)
    landmarker_2dfan4(models / "2dfan4.onnx", box)
    landmarker_68_5(models / "fan_68_5.onnx")
    recognizer(models / "arcface_w600k_r50.onnx")
    classifier(models / "fairface.onnx")
    for model in ANALYSER_NORMALISATION:
        analyser(models / f"{model}.onnx", model)
    hyperswap(models / "hyperswap_1a_256.onnx")
    inswapper(models / "inswapper_128.onnx")
    occluder(models / "xseg_1.onnx")
    parser(models / "bisenet_resnet_34.onnx")
    return sorted(path.name for path in models.glob("*.onnx"))


if __name__ == "__main__":
    spec = json.loads(sys.argv[2])
    print(json.dumps(build(Path(sys.argv[1]), tuple(spec["box"]))))
