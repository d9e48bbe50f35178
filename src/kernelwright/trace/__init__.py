"""FlashInfer-Trace data model: Definition, Workload, Solution, Trace/Evaluation and TraceSet.

Field names and JSON shapes follow flashinfer-bench (``flashinfer_bench/data/*.py`` at
commit 40e6ca78), so that files written by flashinfer-bench load here unchanged and files
written here load there.  kernelwright's additions (extra timings, guard findings, kernel
provenance) live in optional fields that flashinfer-bench's models ignore on load.
"""

from kernelwright.trace.definition import AxisConst, AxisVar, Definition, TensorSpec
from kernelwright.trace.dtypes import DType, torch_dtype
from kernelwright.trace.solution import BuildSpec, Solution, SourceFile, SupportedLanguage
from kernelwright.trace.trace import (
    Correctness,
    Environment,
    Evaluation,
    EvaluationStatus,
    GateReport,
    KernelRecord,
    Performance,
    Trace,
)
from kernelwright.trace.trace_set import TraceSet
from kernelwright.trace.workload import (
    InputSpec,
    RandomInput,
    SafetensorsInput,
    ScalarInput,
    Workload,
)

__all__ = [
    "AxisConst",
    "AxisVar",
    "BuildSpec",
    "Correctness",
    "DType",
    "Definition",
    "Environment",
    "Evaluation",
    "EvaluationStatus",
    "GateReport",
    "InputSpec",
    "KernelRecord",
    "Performance",
    "RandomInput",
    "SafetensorsInput",
    "ScalarInput",
    "Solution",
    "SourceFile",
    "SupportedLanguage",
    "TensorSpec",
    "Trace",
    "TraceSet",
    "Workload",
    "torch_dtype",
]
