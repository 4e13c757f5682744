"""A tiny ONNX graph builder for the stand-in models: named constants and nodes, float inputs of fixed shapes.

Every model is checked (and shape-inferred in strict mode, so each node agrees with the declared
input and output shapes) before it is written with the `.hash` file FaceFusion's
download.validate_hash checks: zlib CRC-32 of the file, 8 hex digits.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
FLOAT = TensorProto.FLOAT

Shape = tuple[int | str, ...]


class Graph:
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

    def ints(self, values: list[int] | int) -> str:
        return self.const(values, np.int64)

    def op(self, op_type: str, inputs: list[str], **attributes: Any) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attributes))
        return out

    def ops(self, op_type: str, inputs: list[str], count: int, **attributes: Any) -> list[str]:
        """A node with several outputs (Split)."""
        outs = [self.name(op_type.lower()) for _ in range(count)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, **attributes))
        return outs

    def zero_of(self, name: str) -> str:
        """A scalar 0 that depends on `name`, so no output is a constant folded away from the input."""
        return self.op("Mul", [self.op("ReduceMean", [name], keepdims=0), self.const(0.0)])

    def tied(self, value: Any, to: str) -> str:
        return self.op("Add", [self.const(value), self.zero_of(to)])

    def expanded(self, value: Any, shape: tuple[int, ...], to: str) -> str:
        """`value` broadcast to `shape` (a large constant output without a large constant)."""
        return self.op("Expand", [self.tied(value, to), self.ints(list(shape))])

    def channel(self, name: str, index: int, axis: int = 1) -> str:
        """One channel, the axis kept."""
        return self.op("Gather", [name, self.ints([index])], axis=axis)

    def mean(self, name: str, axes: list[int], keepdims: int = 1) -> str:
        return self.op("ReduceMean", [name], axes=axes, keepdims=keepdims)  # opset 17: an attribute

    def clip(self, name: str, low: float, high: float) -> str:
        return self.op("Clip", [name, self.const(low), self.const(high)])

    def scale(self, name: str, factor: float, offset: float = 0.0) -> str:
        return self.op("Add", [self.op("Mul", [name, self.const(factor)]), self.const(offset)])

    def output(self, name: str, value: str, shape: Shape | int, dtype: Any = FLOAT) -> None:
        """`shape`: the real model's; a rank alone where it is not known (free dimensions)."""
        dims: list[Any] = [f"{name}_{axis}" for axis in range(shape)] if isinstance(shape, int) else list(shape)
        self.nodes.append(helper.make_node("Identity", [value], [name]))
        self.outputs.append(helper.make_tensor_value_info(name, dtype, dims))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        graph = helper.make_graph(self.nodes, path.stem, self.inputs, self.outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        onnx.checker.check_model(onnx.shape_inference.infer_shapes(model, strict_mode=True))
        onnx.save(model, str(path))
        path.with_suffix(".hash").write_text(format(zlib.crc32(path.read_bytes()), "08x"))
