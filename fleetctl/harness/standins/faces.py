"""Stand-ins for the models every face processor shares: detector, landmarkers, recogniser, classifier,
masks and the content analyser, with the real models' input and output shapes.

- detector (yoloface_8n, 1×3×640×640 → 1×20×8400): every 96×120 box on an 8-pixel grid, scored by
  its mean faceness (clip((R - B) / 128, 0, 1)); FaceFusion's own threshold and NMS keep the faces.
  A face moves, and so does its box: a step that looked at another frame finds another box.
- landmarkers (2dfan4, fan_68_5): fixed points in the crop, so they follow the box.
- recogniser (arcface_w600k_r50, 1×3×112×112 → 1×512): the identity is the face's G − B (people
  of geometry.PEOPLE lie on opposite sides of the middle), times a fixed direction: the same person
  matches, another person does not.
- classifier (fairface), occluder (xseg_1), parser (bisenet_resnet_34): fixed answers.
- content analyser (nsfw_1..3): flags a frame only when it is mostly red.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto

from fleetctl.harness.geometry import CANVAS, FACE_HEIGHT, FACE_SCORE_DIVISOR, FACE_WIDTH, FIVE_POINTS, GRID, PEOPLE
from fleetctl.harness.standins.graph import Graph

YOLO_CANDIDATES = 8400  # yoloface_8n's anchors at 640×640
EMBEDDING = 512  # arcface's embedding: what the recogniser gives and the swappers take
# nsfw_2 and nsfw_3's preprocessing (content_analyser.create_static_model_set); nsfw_1 has none.
ANALYSER_NORMALISATION = {
    "nsfw_1": ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
    "nsfw_2": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    "nsfw_3": ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
}
ANALYSER_SIZE = {"nsfw_1": 640, "nsfw_2": 384, "nsfw_3": 448}
# The identity's middle: halfway between the people's G − B, in the recogniser's -1..1 units.
_IDENTITY_MIDDLE = float(np.mean([green - blue for blue, green, _ in PEOPLE.values()])) / 127.5
IDENTITY_DIRECTION = np.random.default_rng(7).normal(size=(1, EMBEDDING)).astype(np.float32)


def grid_boxes() -> tuple[int, int]:
    """Rows and columns of candidate boxes on the detector's canvas."""
    return (CANVAS - FACE_HEIGHT) // GRID + 1, (CANVAS - FACE_WIDTH) // GRID + 1


def detector(path: Path) -> None:
    graph = Graph({"input": (1, 3, CANVAS, CANVAS)})  # BGR, 0..1 (face_detector.normalize_detect_frame)
    difference = graph.op("Sub", [graph.channel("input", 2), graph.channel("input", 0)])
    faceness = graph.clip(graph.scale(difference, 255.0 / FACE_SCORE_DIVISOR), 0.0, 1.0)
    pooled = graph.op("AveragePool", [faceness], kernel_shape=[FACE_HEIGHT, FACE_WIDTH], strides=[GRID, GRID])
    rows, columns = grid_boxes()
    count = rows * columns
    scores = graph.op("Reshape", [pooled, graph.ints([1, 1, count])])
    ys, xs = np.mgrid[0:rows, 0:columns]
    left, top = (xs.ravel() * GRID).astype(np.float32), (ys.ravel() * GRID).astype(np.float32)
    ones = np.ones(count, np.float32)
    boxes = np.stack([left + FACE_WIDTH / 2, top + FACE_HEIGHT / 2, ones * FACE_WIDTH, ones * FACE_HEIGHT])
    marks = np.stack([row for u, v in FIVE_POINTS for row in (left + u * FACE_WIDTH, top + v * FACE_HEIGHT, ones)])
    candidates = graph.op("Concat", [graph.const(boxes[None]), scores, graph.const(marks[None])], axis=1)
    # The empty candidates first: FaceFusion tests its kept indices with numpy.any, to which a lone
    # index 0 is no face.
    empty = graph.expanded(np.zeros((1, 20, 1)), (1, 20, YOLO_CANDIDATES - count), "input")
    graph.output("output", graph.op("Concat", [empty, candidates], axis=2), (1, 20, YOLO_CANDIDATES))
    graph.save(path)


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


def landmarker_2dfan4(path: Path) -> None:
    # face_landmarker.detect_with_2dfan4 crops the box scaled to 195 px, centred in 256 px, and
    # reads the points on a 64 px grid: points fixed in the crop follow the box. A full heatmap
    # makes its score 1.
    scale = 195 / max(FACE_WIDTH, FACE_HEIGHT)
    unit = unit_landmarks_68()
    crop = np.stack([128 + (unit[:, 0] - 0.5) * FACE_WIDTH * scale, 128 + (unit[:, 1] - 0.5) * FACE_HEIGHT * scale], 1)
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
    """The embedding: (G − B of the crop's middle − the people's middle) × 5 × a fixed direction."""
    graph = Graph({"input": (1, 3, 112, 112)})  # RGB, -1..1 (face_recognizer.calculate_face_embedding)
    middle = graph.op("Slice", ["input", graph.ints([28, 28]), graph.ints([84, 84]), graph.ints([2, 3])])
    means = graph.mean(middle, [2, 3], keepdims=0)  # 1×3
    identity = graph.op("Sub", [graph.channel(means, 1), graph.channel(means, 2)])  # 1×1
    centred = graph.scale(identity, 5.0, -5.0 * _IDENTITY_MIDDLE)
    graph.output("output", graph.op("Mul", [centred, graph.const(IDENTITY_DIRECTION)]), (1, EMBEDDING))
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
    channels = graph.mean("input", [0, 2, 3], keepdims=0)  # per channel, RGB
    # Back to 0..1; content_analyser's black padding counts as 0.
    raw = graph.op("Add", [graph.op("Mul", [channels, graph.const(deviation)]), graph.const(mean)])
    red = graph.op("Gather", [raw, graph.const(0, np.int64)])
    green = graph.op("Gather", [raw, graph.const(1, np.int64)])
    score = graph.op("Sub", [graph.op("Sub", [red, green]), graph.const(0.25)])
    column = graph.op("Reshape", [score, graph.ints([1, 1])])
    # Their outputs' shapes are the stand-ins' own (the real ones are not in FaceFusion's source).
    if model == "nsfw_1":  # detect_with_nsfw_1: max of detection[:, 4:] > 0.2
        out = graph.op("Concat", [graph.const(np.zeros((1, 4))), graph.op("Mul", [column, graph.const(4.0)])], axis=1)
        graph.output("output", graph.op("Reshape", [out, graph.ints([1, 5, 1])]), 3)
    elif model == "nsfw_2":  # detection[0] - detection[1] > 0.25
        out = graph.op("Concat", [graph.op("Mul", [column, graph.const(4.0)]), graph.const(np.zeros((1, 1)))], axis=1)
        graph.output("output", out, 2)
    else:  # nsfw_3: (detection[2] + detection[3]) - (detection[0] + detection[1]) > 10.5
        scaled = graph.op("Mul", [column, graph.const(20.0)])
        graph.output("output", graph.op("Concat", [graph.const(np.zeros((1, 2))), scaled, scaled], axis=1), 2)
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


def build(models: Path) -> None:
    detector(models / "yoloface_8n.onnx")
    landmarker_2dfan4(models / "2dfan4.onnx")
    landmarker_68_5(models / "fan_68_5.onnx")
    recognizer(models / "arcface_w600k_r50.onnx")
    classifier(models / "fairface.onnx")
    for model in ANALYSER_NORMALISATION:
        analyser(models / f"{model}.onnx", model)
    occluder(models / "xseg_1.onnx")
    parser(models / "bisenet_resnet_34.onnx")
