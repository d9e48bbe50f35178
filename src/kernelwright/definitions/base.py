"""BuiltinDefinition: a definition together with everything the gate needs to judge it.

A built-in definition bundles the FlashInfer-Trace ``Definition`` (whose ``reference`` string
is the source of our own reference module), the reference callable, the tolerance, which
checker compares outputs, how to synthesise inputs for a workload, the public (contest)
workloads, a generator of hidden workloads, a roofline model and a regime label for tables.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import torch

from kernelwright.trace import Definition, Workload

DATA_DIR = Path(__file__).parent / "data"
# the trace reasons of a workload the parent cannot prepare; gate/guards.py lists them with the
# others (defined here so that definitions do not import the gate)
WORKLOAD_INPUT = "WORKLOAD_INPUT"            # the parent could not prepare a workload's inputs (definitions/fixed.py)
REFERENCE_FAILED = "REFERENCE_FAILED"        # the definition's reference raised on a workload's inputs
SWEEP_PREFIX = "sweep-"


def is_sweep(uuid: str) -> bool:
    """Whether a workload uuid names a serving-envelope (sweep) workload."""
    return uuid.startswith(SWEEP_PREFIX)


def context_of(uuid: str) -> Optional[int]:
    """The request context (tokens) a workload uuid names with a ``-ctx<tokens>`` part (the
    attention envelope's one-request workloads: ``sweep-att-t16-ctx32768``), else None."""
    import re

    found = re.search(r"-ctx(\d+)(?:-|$)", uuid)
    return int(found.group(1)) if found else None



# -- the quick variant's name: ``<name>__quick`` (``BuiltinDefinition.quick_variant``) ----------
QUICK_SUFFIX = "__quick"


def quick_name(name: str) -> str:
    """The name of ``name``'s quick variant: ``<name>__quick``."""
    return name + QUICK_SUFFIX


def is_quick(name: str) -> bool:
    """Whether ``name`` (a definition name, alias or locator) names a quick variant."""
    return name.endswith(QUICK_SUFFIX)


def base_name(name: str) -> str:
    """``name`` without its ``__quick`` suffix (the full-size definition's name)."""
    return name[: -len(QUICK_SUFFIX)] if is_quick(name) else name


class WorkloadProblem(ValueError):
    """A workload the trusted parent cannot prepare: its message is one line, and ``reason`` the
    code its (non-PASSED) trace carries; the run goes on with the next workload."""

    reason = WORKLOAD_INPUT


class ReferenceFailed(WorkloadProblem):
    """The definition's reference raised on a workload's inputs (one line: file, line, error)."""

    reason = REFERENCE_FAILED


@dataclass(frozen=True)
class RowAlternatives:
    """Other correct references of a few rows of an output: what the reference gives on those
    rows when a near-tie that decides them is broken another way (``StrictRule.alternatives``).

    ``rows``: int64 [N], the row each alternative belongs to (a row index over the first
    ``row_axes`` dimensions, flattened; a row may have several alternatives, and ``rows`` may be
    empty).  ``outputs``: {output name: tensor [N, *row shape]}, the alternative rows, in the
    output's dtype.  ``unlisted``: int64 [M], rows with more alternatives than the definition
    enumerates (``moe_fp8.MAX_ROUTINGS``): the per-row bound skips them (recorded as
    ``unlisted_rows``)."""

    rows: torch.Tensor
    outputs: Dict[str, torch.Tensor]
    unlisted: Optional[torch.Tensor] = None


@dataclass(frozen=True)
class StrictRule:
    """kernelwright's own numerical verdict, judged beside the contest rule (docs/gate.md,
    section 2a, gives each definition's thresholds and their measured basis).

    For every floating-point output x against the reference y (in float32, norms summed in
    float64), positions where both are -inf excluded (the attention LSE of an all-padding row):

    * ``rel_l2 = ||x - y||_2 / ||y||_2`` over the whole tensor must be <= ``max_rel_l2``
      (0 when x == y; inf when ||y|| == 0 and x != y, or on any other non-finite value);
    * with ``max_row_rel_l2`` set, for outputs of more than ``row_axes`` dimensions, the same
      ratio per row (a row = one index of the first ``row_axes`` dimensions; MoE: a token,
      attention: a (token, head) pair), over the rows whose reference is nonzero, must be
      <= ``max_row_rel_l2`` at its worst row: a zeroed or dropped row scores 1.0.

    The indexer's checker applies the same two bounds to the sorted recomputed scores: per batch
    row (``max_row_rel_l2``) and over all rows together (``max_rel_l2``).

    Unlike the contest rule, no fraction of the output may be wrong, and a uniform scale error
    of s costs |1 - s| whatever the output's magnitude.

    Rows decided by a near-tie (MoE: a group or expert choice within
    ``moe_fp8.ROUTING_TIE_MARGIN`` of score), which a correct implementation may break the other
    way: ``exempt_rows(inputs)`` returns a bool tensor over the rows (the first ``row_axes``
    dimensions) that have such a tie, and ``alternatives(inputs, rows)`` (``rows``: int64 [K], the
    exempt rows) returns their references with each tie broken every other way
    (``RowAlternatives``).  An exempt row's per-row error is its smallest against the reference
    and against each of its alternatives: it must still be explained by one routing a correct
    kernel could have taken.  The check records how many rows were exempt (``exempt_rows``) and
    how many only an alternative explained (``alternative_rows``).  The two come together.

    Raises:
        ValueError: ``exempt_rows`` without ``alternatives`` or the other way round.
    """

    max_rel_l2: float
    max_row_rel_l2: Optional[float] = None
    row_axes: int = 1
    exempt_rows: Optional[Callable[[Mapping[str, Any]], Any]] = None
    alternatives: Optional[Callable[[Mapping[str, Any], torch.Tensor], RowAlternatives]] = None

    def __post_init__(self) -> None:
        if (self.exempt_rows is None) != (self.alternatives is None):
            raise ValueError("StrictRule: exempt_rows and alternatives come together (an exempt row must be explained)")


@dataclass(frozen=True)
class Tolerance:
    """The numerical verdict of one definition.

    The contest rule (flashinfer-bench ``compute_error_stats``): an element fails only where
    |x-y| > atol AND |x-y|/(|y|+1e-8) > rtol; the output fails when the fraction of
    non-failing elements is below ``required_matched_ratio``.

    ``strict``: kernelwright's rule judged beside it (``StrictRule``); a check passes only when
    both do, unless ``contest_rule_only`` (``--contest-rule``), where the strict errors are still
    computed and recorded but do not judge.  A definition without a strict rule is judged by the
    contest rule alone.
    """

    atol: float
    rtol: float
    required_matched_ratio: float = 1.0
    strict: Optional[StrictRule] = None
    contest_rule_only: bool = False

    @property
    def rule(self) -> str:
        """Which rules judge: ``"contest+strict"`` or ``"contest"`` (recorded in every trace)."""
        return "contest" if self.strict is None or self.contest_rule_only else "contest+strict"

    def contest_only(self) -> "Tolerance":
        """The same tolerance with the strict rule recorded but not judging (``--contest-rule``)."""
        from dataclasses import replace

        return replace(self, contest_rule_only=True)


@dataclass(frozen=True)
class RooflineWork:
    """The least work a workload needs: FLOPs on a given matrix unit and HBM bytes moved
    (each input read once, each output written once)."""

    flops: float
    bytes: float
    unit: str  # "fp8" | "bf16"

    def floor_s(self, ceilings: Mapping[str, float]) -> float:
        """Lower bound on latency in seconds: max(FLOPs / rate, bytes / bandwidth, one launch).

        ``ceilings`` has ``copy_bandwidth_Bps`` and ``fp8_flops``/``bf16_flops`` (per second),
        and optionally ``launch_latency_s``: the device time of one trivial kernel, measured by
        the gate's headline clock (the stream held while the call is enqueued; the host launch is
        not in it).  A call must launch at least one kernel, so no honest latency is below it,
        whatever the bytes and FLOPs.
        Without a rate for this unit (``device_info``: the FP8 matmul could not be timed) the
        FLOP term is left out: the floor is then lower, never invented.
        """
        rate = ceilings.get(f"{self.unit}_flops")
        compute_s = self.flops / rate if rate else 0.0
        return max(compute_s, self.bytes / ceilings["copy_bandwidth_Bps"], ceilings.get("launch_latency_s", 0.0))

    @staticmethod
    def mean(works: "List[RooflineWork]") -> "RooflineWork":
        """The average work over several input draws (e.g. the trials of one workload)."""
        n = len(works)
        return RooflineWork(flops=sum(w.flops for w in works) / n, bytes=sum(w.bytes for w in works) / n,
                            unit=works[0].unit)


InputMaker = Callable[[Definition, Workload, torch.Generator, torch.device], Dict[str, Any]]


@dataclass(frozen=True)
class BuiltinDefinition:
    short: str
    definition: Definition
    reference: Callable[..., Any]
    tolerance: Tolerance
    checker: str  # "elementwise" | "topk_indices" | "attention"
    make_inputs: InputMaker
    public_workloads: Callable[[], List[Workload]]
    hidden_workloads: Callable[[str], List[Workload]]
    quick_workloads: Callable[[], List[Workload]]
    quick_axes: Mapping[str, int]
    # None: no roofline model is known (a definition loaded from a JSON file): no floor, no fraction
    roofline: Optional[Callable[[Mapping[str, Any], Mapping[str, int]], RooflineWork]]
    regime: Callable[[Mapping[str, int]], str]
    regimes_order: List[str] = field(default_factory=list)
    requires_kernel: bool = True
    ref: Optional[str] = None  # "package.module:ATTR" for definitions that are not built in
    # the serving-envelope workload set (``kernelwright bench --sweep``), uuids starting with
    # ``SWEEP_PREFIX``, with its own regimes (e.g. the indexer by context length)
    sweep_workloads: Optional[Callable[[], List[Workload]]] = None
    sweep_regime: Optional[Callable[[Mapping[str, int]], str]] = None
    sweep_regimes_order: List[str] = field(default_factory=list)
    # for plots: (axis label, the x value of a workload's axes), and which line a sweep workload
    # belongs to (e.g. the indexer's batch size); None: workloads in axis order, one line
    size_axis: Optional[Tuple[str, Callable[[Mapping[str, int]], float]]] = None
    sweep_series: Optional[Callable[[Workload], str]] = None
    # where a workload's safetensors inputs are read from (``definitions.fixed.with_fixed_inputs``);
    # None: this definition's workloads have none
    blob_root: Optional[str] = None
    # False: no reduced-size variant exists (a definition from a JSON file): ``quick_variant`` is
    # the definition itself, and ``--quick`` reduces only the iteration counts
    has_quick: bool = True
    # inputs whose values set a call's cost (MoE: the routing, which decides how many experts'
    # weights a token streams), and the function that makes just them (same signature as
    # ``make_inputs``): each timed iteration draws them from a seed that every candidate of a run
    # shares, the other inputs from the candidate's own (gate/fresh.py, "shared" specs), so that
    # candidates are timed on the same costs and still never on the same inputs
    shared_inputs: Tuple[str, ...] = ()
    make_shared_inputs: Optional[InputMaker] = None

    @property
    def locator(self) -> str:
        """What ``kernelwright.definitions.resolve`` needs to find this definition again
        (in another process): the built-in name, or ``module:attribute``."""
        return self.ref or self.name

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def origin(self) -> str:
        """Whose rules judge this definition: ``builtin`` (kernelwright's own definition: its
        checker, input synthesis and roofline), ``module`` (a ``module:ATTR`` BuiltinDefinition
        written by a user) or ``file`` (a FlashInfer-Bench definition JSON: its reference, the
        elementwise checker and flashinfer-bench's input convention)."""
        inner = self.locator.partition("|blobs=")[0]
        if inner.startswith("file:"):
            return "file"
        return "module" if ":" in inner else "builtin"

    def regime_of(self, workload: Workload) -> str:
        """The table row a workload belongs to: the sweep's regimes for sweep workloads (uuid
        starting with ``SWEEP_PREFIX``), the definition's own otherwise."""
        if self.sweep_regime is not None and is_sweep(workload.uuid):
            return self.sweep_regime(workload.axes)
        return self.regime(workload.axes)

    @property
    def all_regimes_order(self) -> List[str]:
        """The contest regimes, then the sweep's."""
        return list(self.regimes_order) + [r for r in self.sweep_regimes_order if r not in self.regimes_order]

    @property
    def base_name(self) -> str:
        """The definition's name without the ``__quick`` suffix of ``quick_variant``."""
        return base_name(self.name)

    @property
    def is_quick(self) -> bool:
        """Whether this is a ``quick_variant`` (its name ends in ``__quick``)."""
        return is_quick(self.name)

    def quick_if(self, quick: bool) -> "BuiltinDefinition":
        """The quick variant when ``quick`` and this is not one already, else this definition."""
        return self.quick_variant() if quick and not self.is_quick else self

    def foreign_solution(self, solution) -> Optional[str]:
        """A one-line problem when ``solution`` (a trace.Solution) was written for another
        definition than this one (or its quick variant), else None."""
        if solution.definition != self.base_name:
            from kernelwright.definitions import get_or_none

            named = get_or_none(solution.definition)
            if named is not None and named.base_name == self.base_name:
                return (f"solution {solution.name!r} names its definition by the alias {solution.definition!r}: "
                        f"a solution (manifest.json or Solution JSON) names it in full, {self.base_name!r}")
            return f"solution {solution.name!r} is for {solution.definition}, not {self.base_name}"
        return None

    def with_contest_rule(self) -> "BuiltinDefinition":
        """This definition judged by the contest rule alone (``--contest-rule``): the strict
        errors are still computed and recorded, and do not judge."""
        from dataclasses import replace

        return replace(self, tolerance=self.tolerance.contest_only())

    def quick_variant(self) -> "BuiltinDefinition":
        """The same definition at reduced const sizes, named ``<name>__quick``, with small
        workloads: what ``--quick`` and the CPU tests run.  A definition without one
        (``has_quick`` False) is returned as it is."""
        from dataclasses import replace

        if not self.has_quick:
            return self
        if self.blob_root is not None:
            raise ValueError(f"{self.name}: take the quick variant before wrapping fixed inputs")

        small = self.definition.with_const_axes(self.quick_axes, quick_name(self.name))
        full_hidden = self.hidden_workloads

        def size(w: Workload) -> int:
            n = 1
            for v in w.axes.values():
                n *= max(1, int(v))
            return n

        cap = 4 * max(size(w) for w in self.quick_workloads())

        def small_hidden(salt: str) -> List[Workload]:
            # held-out shapes no larger than 4x the largest quick workload (cheap under the
            # interpreter), at most two; the smallest one if none is that small
            ranked = sorted(full_hidden(salt), key=size)
            small = [w for w in ranked if size(w) <= cap][:2]
            return small or ranked[:1]

        return replace(self, definition=small, public_workloads=self.quick_workloads,
                       hidden_workloads=small_hidden, ref=quick_name(self.ref) if self.ref else None,
                       sweep_workloads=None)


# the BuiltinDefinition fields a built-in definition package defines under their own names
PACKAGE_FIELDS = ("make_inputs", "public_workloads", "hidden_workloads", "quick_workloads", "roofline", "regime",
                  "sweep_workloads", "sweep_regime")


def package_builtin(package: ModuleType, **fields: Any) -> BuiltinDefinition:
    """The BuiltinDefinition of a built-in definition package: its ``DEFINITION``, its
    ``reference.run`` and each of ``PACKAGE_FIELDS`` it defines (a package without a serving
    envelope has no ``sweep_*``); ``fields`` gives the others and overrides any of these."""
    found = {name: getattr(package, name) for name in PACKAGE_FIELDS if hasattr(package, name)}
    return BuiltinDefinition(definition=package.DEFINITION, reference=package.reference.run, **{**found, **fields})


def load_definition(folder: Path, reference: ModuleType) -> Definition:
    """Our definition spec (``spec.json``) with the reference module's source as ``reference``."""
    spec = json.loads((Path(folder) / "spec.json").read_text())
    spec["reference"] = inspect.getsource(reference)
    return Definition.model_validate(spec)


def contest_axes(name: str) -> Dict[str, Dict[str, float]]:
    """uuid -> axis values (and scalar inputs) of the contest workloads of one definition."""
    table = json.loads((DATA_DIR / "contest_workload_axes.json").read_text())["workloads"]
    return table[name]
