"""Any FlashInfer-Bench definition JSON as a definition the gate can judge.

``from_file(path)`` (or ``from_definition``) builds a ``BuiltinDefinition`` from the JSON alone:

* **reference**: the definition's ``reference`` string, compiled lazily in the process that first
  calls it -- the trusted parent.  The worker resolves the same definition (by locator) to draw
  its inputs, but never calls the reference, so it never compiles it either.  Called with the
  inputs in the definition's order, under ``torch.no_grad()``; an exception becomes one line
  naming the definition file and the reference's line (``ReferenceFailed``).
* **inputs** by the flashinfer-bench random convention (``bench/utils.py:_rand_tensor``): floats
  ``randn``; FP8 ``randn`` clamped to +-2 then cast; bool 0/1; integers in ``[-1024, 1024)``
  (``[-128, 128)`` for int8) unless a constraint gives a range (``0 <= idx``, ``idx < num_pages``,
  ``t.max() < n``: bounds over axes) or makes a 1-D tensor the offsets of segments ending at an
  axis (``total_seq_len == cu_seqlens[-1].item()``: 0, then sorted cut points, then the total);
  scalars from the workload (a random scalar draws one element, as upstream); safetensors
  inputs are left to ``definitions.fixed``.  After drawing, every constraint that can be
  evaluated over the axes and the inputs must hold (else ``WorkloadInputError``).
* **checker**: ``elementwise`` with flashinfer-bench's default tolerance (atol = rtol = 1e-2,
  matched ratio 1.0; 0.95 for ``op_type`` moe, its ``eval_config.yaml``).
* **no roofline**, no hidden split, no reduced-size variant (``--quick`` reduces the iteration
  counts only); one regime; a plot axis when there is exactly one var axis.

Its locator is ``file:<absolute path>#sha256=<digest of the file>``: the worker and a pool
worker find the same file, and refuse it when its content changed since the run began (a
solution cannot rewrite the reference or the shapes it is judged by).
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from kernelwright.definitions.base import BuiltinDefinition, ReferenceFailed, Tolerance
from kernelwright.diagnostics import exception_line
from kernelwright.inputs import random_offsets, random_tensor
from kernelwright.trace import Definition, RandomInput, SafetensorsInput, ScalarInput, Workload, torch_dtype
from kernelwright.trace.jsonio import DataFileError, load_model

FILE_PREFIX = "file:"
FIB_TOLERANCE = Tolerance(atol=1e-2, rtol=1e-2, required_matched_ratio=1.0)
# flashinfer-bench ``bench/eval_config.yaml``: per op_type matched ratios
OP_TYPE_MATCHED_RATIO = {"moe": 0.95}
_INT_DEFAULT = {torch.int8: (-128, 128)}
_INT_RANGE = (-1024, 1024)


def default_tolerance(definition: Definition) -> Tolerance:
    """flashinfer-bench's default tolerance for a definition of this ``op_type``."""
    ratio = OP_TYPE_MATCHED_RATIO.get(definition.op_type, FIB_TOLERANCE.required_matched_ratio)
    return Tolerance(atol=FIB_TOLERANCE.atol, rtol=FIB_TOLERANCE.rtol, required_matched_ratio=ratio)


# -- locators ------------------------------------------------------------------------------
def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def locator_for(path: Path) -> str:
    """``file:<absolute path>#sha256=<digest>`` of a definition file."""
    path = Path(path).resolve()
    return f"{FILE_PREFIX}{path}#sha256={file_digest(path)}"


def parse_locator(locator: str) -> Tuple[Path, Optional[str]]:
    """(path, digest or None) of a ``file:`` locator."""
    body = locator[len(FILE_PREFIX):]
    path, sep, digest = body.rpartition("#sha256=")
    return (Path(path), digest) if sep else (Path(body), None)


def load_file(path: Path) -> Definition:
    """A definition JSON.  Raises DataFileError (one line naming the file)."""
    return load_model(Definition, Path(path))


def from_locator(locator: str, blob_root: Optional[str] = None) -> BuiltinDefinition:
    """The definition a ``file:`` locator names (``blob_root``: its workloads' safetensors root, the
    locator's ``|blobs=`` part).  Raises DataFileError when the file is gone or its content
    differs from the digest the locator pins."""
    path, digest = parse_locator(locator)
    if digest is not None:
        try:
            found = file_digest(path)
        except OSError as exc:
            raise DataFileError(f"{path}: cannot read ({exc.strerror})") from exc
        if found != digest:
            raise DataFileError(f"{path}: changed since the run began (sha256 {digest[:12]}... expected, "
                                f"{found[:12]}... found)")
    return from_definition(load_file(path), locator, source=path, blob_root=blob_root)


def from_file(path: Path, workloads: Optional[Sequence[Workload]] = None,
              blob_root: Optional[Path] = None) -> BuiltinDefinition:
    """A definition JSON with the workloads to run (default none), their safetensors paths relative
    to ``blob_root`` (the TraceSet root or the workload file's folder).  Raises DataFileError."""
    return from_definition(load_file(path), locator_for(path), workloads, source=Path(path).resolve(),
                           blob_root=blob_root)


def from_definition(definition: Definition, locator: str, workloads: Optional[Sequence[Workload]] = None,
                    source: Optional[Path] = None, blob_root: Optional[Path] = None) -> BuiltinDefinition:
    """The gate's view of ``definition`` (see the module docstring); ``locator`` (without a
    ``|blobs=`` part) must let another process find the same definition (``locator_for``)."""
    from kernelwright.definitions.fixed import BLOBS_SEPARATOR

    root = str(Path(blob_root).resolve()) if blob_root is not None else None
    if root is not None and BLOBS_SEPARATOR not in locator:
        locator = locator + BLOBS_SEPARATOR + root
    chosen = list(workloads or [])
    var_axes = definition.var_axes
    size_axis = None
    if len(var_axes) == 1:
        axis = var_axes[0]
        size_axis = (axis, lambda axes, _a=axis: axes[_a])
    return BuiltinDefinition(
        short=definition.name,
        definition=definition,
        reference=Reference(definition, source),
        tolerance=default_tolerance(definition),
        checker="elementwise",
        make_inputs=InputMaker(root),
        public_workloads=lambda: list(chosen),
        hidden_workloads=lambda salt: [],
        quick_workloads=lambda: list(chosen),
        quick_axes={},
        roofline=None,
        regime=lambda axes: "all",
        regimes_order=["all"],
        ref=locator,
        size_axis=size_axis,
        has_quick=False,
        blob_root=root,
    )


# -- the reference -------------------------------------------------------------------------
class Reference:
    """The definition's ``reference`` source as a callable ``(**inputs) -> outputs``, compiled on
    first call.  Raises ReferenceFailed (one line) for anything the reference raises."""

    def __init__(self, definition: Definition, source: Optional[Path] = None):
        self._definition = definition
        self._shown = f"{Path(source).name} (reference)" if source else f"{definition.name} (reference)"
        self._filename = f"<reference of {definition.name}>"
        self._run: Optional[Callable[..., Any]] = None

    def _compiled(self) -> Callable[..., Any]:
        if self._run is None:
            module_name = "kw_reference_" + re.sub(r"\W", "_", self._definition.name)
            namespace: Dict[str, Any] = {"__name__": module_name}
            try:
                exec(compile(self._definition.reference, self._filename, "exec"), namespace)
            except Exception as exc:
                raise ReferenceFailed(exception_line(exc, {self._filename: self._shown})) from exc
            self._run = namespace["run"]
        return self._run

    def __call__(self, **inputs: Any) -> Any:
        run = self._compiled()
        args = [inputs[name] for name in self._definition.inputs]
        try:
            with torch.no_grad():
                return run(*args)
        except Exception as exc:
            raise ReferenceFailed(exception_line(exc, {self._filename: self._shown})) from exc


# -- inputs --------------------------------------------------------------------------------
@dataclass(frozen=True)
class IntRule:
    """How to draw one integer tensor: ``offsets`` ending at the expression ``total``, or
    ``randint`` between the bound expressions (over axes; None: the upstream default)."""

    total: Optional[str] = None
    low: Optional[str] = None          # inclusive
    high: Optional[str] = None         # exclusive


def _last_element_of(node: ast.AST) -> Optional[str]:
    """``T`` for ``T[-1].item()`` or ``T[-1]``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "item" \
            and not node.args:
        node = node.func.value
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        index = node.slice
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) and \
                isinstance(index.operand, ast.Constant) and index.operand.value == 1:
            return node.value.id
    return None


def _tensor_of(node: ast.AST, tensors: Sequence[str]) -> Optional[Tuple[str, str]]:
    """(name, "all"|"min"|"max") for ``T``, ``T.min()`` or ``T.max()`` with T an input tensor."""
    if isinstance(node, ast.Name) and node.id in tensors:
        return node.id, "all"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("min", "max") \
            and isinstance(node.func.value, ast.Name) and node.func.value.id in tensors and not node.args:
        return node.func.value.id, node.func.attr
    return None


def _over_axes(node: ast.AST, axes: Sequence[str]) -> bool:
    return all(n.id in axes for n in ast.walk(node) if isinstance(n, ast.Name))


_FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Eq: ast.Eq}


def int_rules(definition: Definition) -> Dict[str, IntRule]:
    """The integer inputs whose values the constraints pin down (see the module docstring)."""
    tensors = [n for n, s in definition.inputs.items() if s.shape is not None and not s.dtype.is_float]
    axes = list(definition.axes)
    rules: Dict[str, Dict[str, str]] = {}
    for expr in definition.constraints:
        try:
            tree = ast.parse(expr, mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(tree, ast.Compare):
            continue
        operands = [tree.left] + list(tree.comparators)
        for left, op, right in zip(operands, tree.ops, operands[1:]):
            for a, b, o in ((left, right, type(op)), (right, left, _FLIP.get(type(op)))):
                if o is None or not _over_axes(b, axes):
                    continue
                bound = ast.unparse(b)
                last = _last_element_of(a)
                if o is ast.Eq and last in tensors:
                    rules.setdefault(last, {})["total"] = bound
                    continue
                found = _tensor_of(a, tensors)
                if found is None:
                    continue
                name, part = found
                if o in (ast.Lt, ast.LtE) and part in ("all", "max"):
                    rules.setdefault(name, {})["high"] = bound if o is ast.Lt else f"({bound}) + 1"
                elif o in (ast.Gt, ast.GtE) and part in ("all", "min"):
                    rules.setdefault(name, {})["low"] = bound if o is ast.GtE else f"({bound}) + 1"
    return {name: IntRule(**r) for name, r in rules.items()}


def _value(expr: str, axes: Mapping[str, int]) -> int:
    return int(eval(compile(expr, "<constraint>", "eval"), {"__builtins__": {}}, dict(axes)))


def _draw(name: str, shape: Tuple[int, ...], dtype: torch.dtype, rule: Optional[IntRule], axes: Mapping[str, int],
          gen: torch.Generator, device: torch.device) -> torch.Tensor:
    from kernelwright.definitions.fixed import WorkloadInputError

    if rule is None or dtype.is_floating_point or dtype is torch.bool:
        return random_tensor(shape, dtype, gen, device)
    if rule.total is not None and len(shape) == 1:
        try:
            return random_offsets(shape[0], _value(rule.total, axes), dtype, gen, device)
        except ValueError as exc:
            raise WorkloadInputError(f"input {name!r}: {exc}") from exc
    low, high = _INT_DEFAULT.get(dtype, _INT_RANGE)
    low = _value(rule.low, axes) if rule.low is not None else low
    high = _value(rule.high, axes) if rule.high is not None else high
    if low >= high:
        raise WorkloadInputError(f"input {name!r}: the constraints leave no value (range [{low}, {high}))")
    return torch.randint(low, high, shape, dtype=dtype, device=device, generator=gen)


class InputMaker:
    """``make_inputs`` of a definition JSON: ``draw_inputs``, then the workload's safetensors
    inputs (``definitions.fixed``, paths under ``blob_root``), then ``failed_constraints`` must be
    empty.  Raises WorkloadInputError (one line)."""

    def __init__(self, blob_root: Optional[str]):
        self.blob_root = blob_root
        self._cache: dict = {}

    def __call__(self, definition: Definition, workload: Workload, gen: torch.Generator,
                 device: torch.device) -> Dict[str, Any]:
        from kernelwright.definitions import fixed

        values = draw_inputs(definition, workload, gen, device)
        values.update(fixed.load_fixed(definition, workload, Path(self.blob_root) if self.blob_root else None, device,
                                       self._cache))
        failed = failed_constraints(definition, workload, values)
        if failed:
            raise fixed.WorkloadInputError(f"workload {workload.uuid}: the inputs break the definition's "
                                           f"constraint(s) {failed[:3]}")
        return values


def draw_inputs(definition: Definition, workload: Workload, gen: torch.Generator,
                device: torch.device) -> Dict[str, Any]:
    """The random inputs and scalars of one draw, in the definition's order (safetensors inputs
    left out).  Raises WorkloadInputError when the constraints leave no value."""
    axes = definition.axis_values(workload.axes)
    rules = int_rules(definition)
    out: Dict[str, Any] = {}
    for name, spec in definition.inputs.items():
        source = workload.inputs.get(name, RandomInput())
        if isinstance(source, ScalarInput):
            out[name] = source.value
        elif isinstance(source, SafetensorsInput):
            continue
        elif spec.shape is None:
            out[name] = random_tensor((), torch_dtype(spec.dtype), gen, device).item()
        else:
            shape = tuple(definition.shape_of(name, workload.axes))
            out[name] = _draw(name, shape, torch_dtype(spec.dtype), rules.get(name), axes, gen, device)
    return out


def failed_constraints(definition: Definition, workload: Workload, inputs: Mapping[str, Any]) -> List[str]:
    """The constraints that evaluate to False over the axes and these inputs (those that cannot
    be evaluated, e.g. over an input not given, are left out)."""
    namespace: Dict[str, Any] = dict(definition.axis_values(workload.axes))
    namespace.update(inputs)
    failed = []
    for expr in definition.constraints:
        try:
            ok = bool(eval(compile(expr, "<constraint>", "eval"), {"__builtins__": {}}, namespace))
        except Exception:
            continue
        if not ok:
            failed.append(expr)
    return failed
