"""Stand-ins for the swappers: hyperswap_1a_256, inswapper_128 and the deep swapper's DeepFaceLive model.

- hyperswap_1a_256 (source 1×512, target 1×3×256×256, normalised to -1..1): the crop negated (255 -
  value once undone), tinted by the source embedding's projection on three fixed directions, so a
  swap from another source face shows.
- inswapper_128 (target 0..1, no normalisation): 1 - the crop, tinted alike; it carries, as the real
  one does, a 512×512 matrix as its graph's last initializer, which
  face_swapper.prepare_source_embedding multiplies the source embedding by.
- iperov/elon_musk_224.dfm (in_face:0 1×224×224×3 BGR 0..1, morph_value:0): the crop with red and
  blue exchanged, scaled by 0.5 + morph / 2; both masks whole.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fleetctl.harness.geometry import SOURCE_TINT
from fleetctl.harness.standins.faces import EMBEDDING, IDENTITY_DIRECTION
from fleetctl.harness.standins.graph import Graph

# The source embedding (± the identity direction, normalised, for the harness's people) to RGB tints.
_UNIT = IDENTITY_DIRECTION / np.linalg.norm(IDENTITY_DIRECTION)
TINT = (_UNIT.reshape(EMBEDDING, 1) * np.asarray(SOURCE_TINT, np.float32)[None, :]).astype(np.float32)
DEEP_SIZE = 224


def _tint(graph: Graph, scale: float) -> str:
    """1×3×1×1: what the source embedding adds to each channel (SOURCE_TINT, in the model's units)."""
    tint = graph.op("MatMul", ["source", graph.const((TINT * scale).astype(np.float32))])
    return graph.op("Reshape", [tint, graph.ints([1, 3, 1, 1])])


def hyperswap(path: Path) -> None:
    shape = (1, 3, 256, 256)
    graph = Graph({"source": (1, EMBEDDING), "target": shape})
    graph.output("output", graph.op("Add", [graph.op("Neg", ["target"]), _tint(graph, 2.0)]), shape)
    graph.save(path)


def inswapper(path: Path) -> None:
    shape = (1, 3, 128, 128)
    graph = Graph({"source": (1, EMBEDDING), "target": shape})
    inverted = graph.op("Sub", [graph.const(np.ones((1, 1, 1, 1))), "target"])
    # The embedding map is a rotation here: the source reaches the model as (unit @ map), so the
    # tint is read back through the map's transpose.
    embedding_map, _ = np.linalg.qr(np.random.default_rng(11).normal(size=(EMBEDDING, EMBEDDING)))
    tint = graph.op("MatMul", ["source", graph.const((embedding_map.T @ TINT).astype(np.float32))])
    graph.output("output", graph.op("Add", [inverted, graph.op("Reshape", [tint, graph.ints([1, 3, 1, 1])])]), shape)
    graph.const(embedding_map)  # last: the embedding map face_swapper.prepare_source_embedding reads
    graph.save(path)


def deep_swapper(path: Path) -> None:
    shape = (1, DEEP_SIZE, DEEP_SIZE, 3)
    graph = Graph({"in_face:0": shape, "morph_value:0": (1,)})
    swapped = graph.op("Gather", ["in_face:0", graph.ints([2, 1, 0])], axis=3)
    weight = graph.scale("morph_value:0", 0.5, 0.5)
    mask = graph.expanded(np.ones((1, 1, 1, 1)), (1, DEEP_SIZE, DEEP_SIZE, 1), "in_face:0")
    # deep_swapper.forward unpacks them in this order: target mask, face, source mask.
    graph.output("out_face_mask:0", mask, (1, DEEP_SIZE, DEEP_SIZE, 1))
    graph.output("out_celeb_face:0", graph.op("Mul", [swapped, weight]), shape)
    graph.output("out_celeb_face_mask:0", graph.op("Identity", [mask]), (1, DEEP_SIZE, DEEP_SIZE, 1))
    graph.save(path)


def build(models: Path) -> None:
    hyperswap(models / "hyperswap_1a_256.onnx")
    inswapper(models / "inswapper_128.onnx")
    deep_swapper(models / "iperov" / "elon_musk_224.dfm")
