"""Trace and Evaluation: the record of one solution run on one workload.

Schema: flashinfer-bench ``flashinfer_bench/data/trace.py``.  The fields ``Performance``'s
extra timings and ``Evaluation.gate`` are kernelwright's own; flashinfer-bench ignores them
when it loads our traces (its models keep pydantic's default ``extra="ignore"``).
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any, Dict, List, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kernelwright.trace.workload import Workload


class Correctness(BaseModel):
    """Error of the solution's outputs against the reference, over all trials and outputs."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    max_relative_error: float = 0.0
    max_absolute_error: float = 0.0
    extra: Optional[Dict[str, Any]] = None

    @field_validator("max_relative_error", "max_absolute_error")
    @classmethod
    def _non_negative(cls, v: float) -> float:
        if not math.isnan(v) and v < 0:
            raise ValueError("must be non-negative or NaN")
        return v


class Performance(BaseModel):
    """Timing of a passing solution, in milliseconds.

    ``latency_ms`` is the headline (FlashInfer-Trace's field), on the clock named by ``clock``:
    ``device`` -- the stream held by a blocking kernel while the call is enqueued, then CUDA
    events around the call (host launch excluded, every GPU gap inside the call included);
    ``eager`` -- CUDA events with the device idle before the start (host launch included), used
    when the call cannot be timed by device time; ``cpu`` -- a perf_counter span.  Cold L2, fresh
    inputs per iteration, median over iterations per trial, mean over trials; ``timing_method``
    says it in words.  ``eager_latency_ms`` is the eager latency of the same call (what a caller
    in eager PyTorch waits for); ``graph_latency_ms`` the same call replayed from a CUDA graph
    behind the hold (None when the solution is not capturable); ``kernel_time_ms`` the sum of the
    call's kernel durations from CUPTI and ``kernel_span_ms`` their first-start-to-last-end span
    (FlashInfer-Bench's timer; both None without CUPTI).  ``reference_latency_ms`` is the
    reference's eager latency (references synchronise with the host).
    """

    latency_ms: float = Field(default=0.0, ge=0.0)
    reference_latency_ms: float = Field(default=0.0, ge=0.0)
    speedup_factor: float = Field(default=0.0, ge=0.0)
    clock: Optional[str] = None
    eager_latency_ms: Optional[float] = None
    graph_latency_ms: Optional[float] = None
    kernel_time_ms: Optional[float] = None
    kernel_span_ms: Optional[float] = None
    timing_method: Optional[str] = None
    latency_samples_ms: Optional[List[float]] = None


class Environment(BaseModel):
    hardware: str = Field(min_length=1)
    libs: Dict[str, str] = Field(default_factory=dict)


class EvaluationStatus(str, Enum):
    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"


class KernelRecord(BaseModel):
    """A GPU kernel seen during the timed calls (CUPTI activity or the torch profiler)."""

    name: str
    count: int = 0
    total_us: float = 0.0
    origin: str = "solution"  # "solution" | "vendor" | "torch"


class GateReport(BaseModel):
    """What the gate found beyond the FlashInfer-Bench status: reason codes and evidence.

    ``reasons`` are the guard codes that decided a rejection (empty when passed); ``detail`` is
    the one line that says why (file and line of a solution's error, a worker's exit code, the
    guard's finding), what tables print for a failed workload;
    ``suspicious`` marks a result the gate does not believe (e.g. faster than the roofline
    floor), which keeps it out of every "best" selection; ``warnings`` are advisory findings
    (static scan) that do not change the verdict.
    """

    reasons: List[str] = Field(default_factory=list)
    detail: Optional[str] = None
    suspicious: bool = False
    warnings: List[str] = Field(default_factory=list)
    split: str = "public"
    trials: int = 0
    kernels: List[KernelRecord] = Field(default_factory=list)
    roofline_floor_ms: Optional[float] = None
    roofline_fraction: Optional[float] = None
    notes: Dict[str, Any] = Field(default_factory=dict)


class Evaluation(BaseModel):
    """Outcome of evaluating one solution on one workload.

    Raises (on construction) when correctness/performance presence does not match the status,
    exactly as flashinfer-bench validates it.
    """

    model_config = ConfigDict(ser_json_inf_nan="strings")

    status: EvaluationStatus
    environment: Environment
    timestamp: str = Field(min_length=1)
    log: str = ""
    correctness: Optional[Correctness] = None
    performance: Optional[Performance] = None
    gate: Optional[GateReport] = None

    @model_validator(mode="after")
    def _fields_match_status(self) -> "Evaluation":
        s = self.status
        if s == EvaluationStatus.PASSED:
            if self.correctness is None or self.performance is None:
                raise ValueError("a PASSED evaluation needs correctness and performance")
        elif s == EvaluationStatus.INCORRECT_NUMERICAL:
            if self.correctness is None or self.performance is not None:
                raise ValueError("INCORRECT_NUMERICAL needs correctness and no performance")
        elif self.correctness is not None or self.performance is not None:
            raise ValueError(f"{s.value} carries neither correctness nor performance")
        return self


class Trace(BaseModel):
    """A solution's evaluation on a workload; with ``solution`` and ``evaluation`` unset it is a
    workload trace (how workloads are stored on disk)."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    definition: str = Field(min_length=1)
    workload: Workload
    solution: Optional[str] = None
    evaluation: Optional[Evaluation] = None

    def is_workload_trace(self) -> bool:
        return self.solution is None and self.evaluation is None

    @property
    def passed(self) -> bool:
        return self.evaluation is not None and self.evaluation.status == EvaluationStatus.PASSED

    @property
    def trusted_pass(self) -> bool:
        """Passed and not marked suspicious: eligible for any "best" selection."""
        return self.passed and not (self.evaluation.gate and self.evaluation.gate.suspicious)
