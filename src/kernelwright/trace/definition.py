"""Definition: the formal specification of a kernel (axes, tensors, reference, constraints).

Schema: flashinfer-bench ``flashinfer_bench/data/definition.py`` (FlashInfer-Trace).
"""

from __future__ import annotations

import ast
from typing import Dict, List, Literal, Mapping, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kernelwright.trace.dtypes import DType


class AxisConst(BaseModel):
    """An axis with a fixed value (e.g. ``hidden_size = 7168``)."""

    type: Literal["const"] = "const"
    value: int = Field(ge=0)
    description: Optional[str] = None


class AxisVar(BaseModel):
    """An axis whose value a workload binds (e.g. ``seq_len``)."""

    type: Literal["var"] = "var"
    description: Optional[str] = None


class TensorSpec(BaseModel):
    """A named tensor: its shape as a list of axis names (``None`` for a scalar) and dtype."""

    shape: Optional[List[str]]
    dtype: DType
    description: Optional[str] = None

    @property
    def is_scalar(self) -> bool:
        return self.shape is None


class Definition(BaseModel):
    """A kernel definition.

    ``inputs`` order is the positional calling convention of solutions; in destination-passing
    style the ``outputs`` follow as trailing positional arguments.

    Raises (on construction) ``pydantic.ValidationError`` when the reference does not parse or
    lacks a top-level ``run``, a constraint is not a Python expression, input and output names
    overlap, or a shape names an undefined axis.
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    op_type: str = Field(min_length=1)
    axes: Dict[str, Union[AxisConst, AxisVar]]
    inputs: Dict[str, TensorSpec]
    outputs: Dict[str, TensorSpec]
    reference: str = Field(min_length=1)
    tags: List[str] = Field(default_factory=list)
    description: Optional[str] = None
    constraints: List[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _validate(self) -> "Definition":
        try:
            module = ast.parse(self.reference, mode="exec")
        except SyntaxError as exc:
            raise ValueError(f"reference is not valid Python: {exc}") from exc
        if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in module.body):
            raise ValueError("reference must define a top-level function named 'run'")
        for expr in self.constraints:
            try:
                ast.parse(expr, mode="eval")
            except SyntaxError as exc:
                raise ValueError(f"constraint {expr!r} is not a Python expression") from exc
        if set(self.inputs) & set(self.outputs):
            raise ValueError("input and output names must not overlap")
        for tname, spec in {**self.inputs, **self.outputs}.items():
            for axis in spec.shape or []:
                if axis not in self.axes:
                    raise ValueError(f"tensor {tname!r} references undefined axis {axis!r}")
        return self

    # -- derived views -------------------------------------------------------------------
    @property
    def const_axes(self) -> Dict[str, int]:
        return {k: a.value for k, a in self.axes.items() if isinstance(a, AxisConst)}

    @property
    def var_axes(self) -> List[str]:
        return [k for k, a in self.axes.items() if isinstance(a, AxisVar)]

    @property
    def input_names(self) -> List[str]:
        return list(self.inputs)

    @property
    def output_names(self) -> List[str]:
        return list(self.outputs)

    def axis_values(self, var_values: Mapping[str, int]) -> Dict[str, int]:
        """All axis values: the const axes plus the given var-axis bindings.

        Raises:
            ValueError: a var axis is missing or an unknown axis is given.
        """
        unknown = set(var_values) - set(self.axes)
        if unknown:
            raise ValueError(f"unknown axes for {self.name}: {sorted(unknown)}")
        missing = [a for a in self.var_axes if a not in var_values]
        if missing:
            raise ValueError(f"missing values for var axes {missing} of {self.name}")
        values = dict(self.const_axes)
        values.update({k: int(v) for k, v in var_values.items()})
        return values

    def shape_of(self, tensor: str, var_values: Mapping[str, int]) -> Optional[Tuple[int, ...]]:
        """Concrete shape of an input or output tensor (``None`` for a scalar)."""
        spec = self.inputs.get(tensor) or self.outputs.get(tensor)
        if spec is None:
            raise KeyError(f"{self.name} has no tensor {tensor!r}")
        if spec.shape is None:
            return None
        values = self.axis_values(var_values)
        return tuple(values[a] for a in spec.shape)

    def var_values_from_shapes(self, shapes: Mapping[str, Tuple[int, ...]]) -> Dict[str, int]:
        """Bind var axes from concrete input shapes (flashinfer-bench ``get_axes_values``).

        Raises:
            ValueError: ranks differ from the spec, or one axis gets two different values.
        """
        found: Dict[str, int] = {}
        for name, spec in self.inputs.items():
            if spec.shape is None or name not in shapes:
                continue
            shape = tuple(shapes[name])
            if len(shape) != len(spec.shape):
                raise ValueError(f"input {name!r} has rank {len(shape)}, expected {len(spec.shape)}")
            for axis, size in zip(spec.shape, shape):
                if isinstance(self.axes[axis], AxisVar):
                    if axis in found and found[axis] != size:
                        raise ValueError(f"axis {axis!r} bound to both {found[axis]} and {size}")
                    found[axis] = int(size)
        return found

    def with_const_axes(self, overrides: Mapping[str, int], name: str) -> "Definition":
        """A copy with some const axes changed, under a new name (used for reduced-size variants).

        Raises:
            ValueError: an override names an axis that is not const.
        """
        axes = dict(self.axes)
        for key, value in overrides.items():
            if not isinstance(axes.get(key), AxisConst):
                raise ValueError(f"{key!r} is not a const axis of {self.name}")
            axes[key] = AxisConst(value=int(value), description=axes[key].description)
        return self.model_copy(update={"axes": axes, "name": name})

    def check_constraints(self, var_values: Mapping[str, int]) -> List[str]:
        """The constraint expressions that do not hold for these axis values."""
        values = self.axis_values(var_values)
        failed = []
        for expr in self.constraints:
            try:
                ok = bool(eval(compile(expr, "<constraint>", "eval"), {"__builtins__": {}}, values))
            except Exception:  # an expression over names this workload lacks: not checkable
                continue
            if not ok:
                failed.append(expr)
        return failed
