"""Guard reason codes and the checks that do not need a GPU.

Every guard that rejects a solution writes one of these codes into ``GateReport.reasons``; the
verdict is the first failing guard.  Codes are stable strings (documented in docs/gate.md).
"""

from __future__ import annotations

import ast
import os
import re
import statistics
import types
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional

import torch

# -- reason codes -------------------------------------------------------------------------
NON_FINITE = "NON_FINITE"                    # NaN/inf in an output (incl. an unwritten, poisoned element)
TOLERANCE = "TOLERANCE"                      # outside atol/rtol/matched ratio
STRICT_TOLERANCE = "STRICT_TOLERANCE"        # within the contest rule, outside the strict rule (relative L2)
INTEGRITY_INCOMPLETE = "INTEGRITY_INCOMPLETE"  # the worker could not snapshot the evaluated definition's functions
STALE_OUTPUT = "STALE_OUTPUT"                # a sampled timed iteration's output is wrong for that input set
OUTPUT_PREWRITTEN = "OUTPUT_PREWRITTEN"      # an output lost its poison before the timed call (work in the harness's window)
GRAPH_STALE_OUTPUT = "GRAPH_STALE_OUTPUT"    # a graph replay's output is wrong for the replayed inputs
INPUT_MUTATED = "INPUT_MUTATED"              # an input changed during the call
OUTPUT_NOT_TENSOR = "OUTPUT_NOT_TENSOR"      # returned object is not a plain torch.Tensor (subclass, wrapper)
OUTPUT_WRONG_DEVICE = "OUTPUT_WRONG_DEVICE"
OUTPUT_ALIASES_INPUT = "OUTPUT_ALIASES_INPUT"  # returned tensor shares storage with an input
OUTPUT_REUSED = "OUTPUT_REUSED"              # returned tensor is the storage returned by the previous call
BACKGROUND_THREAD = "BACKGROUND_THREAD"      # threads left running after the call
CHILD_PROCESS = "CHILD_PROCESS"              # child processes left running after the call
UNMEASURED_WORK = "UNMEASURED_WORK"          # device work outside the events' span (side stream)
STREAM_SWITCHED = "STREAM_SWITCHED"          # a call returned with another stream current than the one it was given
NO_KERNELS = "NO_KERNELS"                    # the timed call launched none of the solution's own kernels
VENDOR_KERNELS = "VENDOR_KERNELS"            # most kernel time in vendor-library / aten kernels
PHASE_MISMATCH = "PHASE_MISMATCH"            # timed calls much faster than the traced calls' kernels
HOST_COMPUTE = "HOST_COMPUTE"                # CPU: right outputs with Triton's stores dropped
BELOW_ROOFLINE = "BELOW_ROOFLINE"            # faster than the physical floor: SUSPICIOUS
TIMER_INCONSISTENT = "TIMER_INCONSISTENT"    # reported timings impossible next to the parent's wall clock
NONDETERMINISTIC = "NONDETERMINISTIC"        # two runs on the same inputs disagree beyond tolerance
HIDDEN_SPLIT_FAILED = "HIDDEN_SPLIT_FAILED"  # fails on held-out workloads
TIMER_TAMPERED = "TIMER_TAMPERED"            # the solution replaced a clock/event/sync function in its process
GATE_TAMPERED = "GATE_TAMPERED"              # the solution replaced gate/harness/IPC functions in its process
FILE_TAMPERED = "FILE_TAMPERED"              # a protected file (gate sources, results, cache) changed during a call
L2_PERSISTENCE = "L2_PERSISTENCE"            # the solution enabled persisting L2 lines: SUSPICIOUS
DEVICE_GRAPH_MISMATCH = "DEVICE_GRAPH_MISMATCH"  # device time far below the graph replay of the same call: SUSPICIOUS
WORKER_CRASHED = "WORKER_CRASHED"
WORKER_INIT = "WORKER_INIT"                  # the worker could not build its harness (before any solution)
EXCEPTION = "EXCEPTION"
TIMEOUT = "TIMEOUT"
from kernelwright.definitions.base import REFERENCE_FAILED, WORKLOAD_INPUT  # noqa: E402  (raised by definitions)
BUILD_FAILED = "BUILD_FAILED"                # the solution did not import/compile
SHAPE = "SHAPE"                              # an output's shape differs from the definition
DTYPE = "DTYPE"                              # an output's dtype differs from the definition
MISSING_OUTPUT = "MISSING_OUTPUT"            # an output is missing
OUTPUT_COUNT = "OUTPUT_COUNT"                # a value-returning solution returned the wrong number of outputs
INVALID_INDEX = "INVALID_INDEX"              # indexer: an index outside its row's pages / beyond seq_len, or < -1
DUPLICATE_INDEX = "DUPLICATE_INDEX"          # indexer: the same token id twice in a row

# -- thresholds of the clock guards (docs/gate.md, section 2) ----------------------------------
# UNMEASURED_WORK: the device-synchronised wall clock, less an empty measurement, may exceed the
# events by this factor plus this slack before work outside the measured span is assumed
UNMEASURED_WORK_FACTOR = 2.0
UNMEASURED_WORK_SLACK_MS = 0.05
# DEVICE_GRAPH_MISMATCH: device time below this fraction of the same call's CUDA-graph replay
# (both hide the host launch; honest calls agree within about 10 %, the device-time issue's bar)
DEVICE_GRAPH_MIN_RATIO = 0.75
# outside this relative band around 1 the trace says which clock is the outlier
# (headline.graph_disagreement: the device-time issue's "agree within 10 % or say why")
DEVICE_GRAPH_BAND = 0.10
# UNMEASURED_WORK (CUDA): the CUPTI span over all streams of trial 0's traced calls may exceed the
# events of the same kind of calls by this factor plus this slack (ms) before work on a side stream
# is assumed (CUPTI slows every launch: a launch-bound honest call's traced span is about twice its
# timed latency, see ``phase_verdict``)
CUPTI_SPAN_FACTOR = 3.0
CUPTI_SPAN_SLACK_MS = 0.1
# TIMER_INCONSISTENT: a trial's reported latencies may sum to this multiple of the parent's own wall
# clock of the timing phase, and the worker's clock of the phase may fall to this fraction of the
# parent's less this slack (s), before the worker's clocks are taken to be lying (loose bounds on
# purpose: only a forged clock crosses them)
PARENT_WALL_SLACK = 1.01
WORKER_WALL_MIN_FRACTION = 0.5
WORKER_WALL_SLACK_S = 0.25
# TIMER_INCONSISTENT: a trial's median event latency may exceed the median wall-clock span it was
# recorded in (device-synchronised; for held calls start record -> synchronised) by this factor plus
# this slack (ms): the events sit inside that span, so only a forged latency goes beyond
EVENTS_OVER_WALL_FACTOR = 1.05
EVENTS_OVER_WALL_SLACK_MS = 0.05
# BELOW_ROOFLINE: a headline latency below this fraction of the roofline floor at the device's peak
# is SUSPICIOUS (a 2 % margin for the clocks and the model's counts)
ROOFLINE_MARGIN = 0.98

# -- thresholds of the thread guard (BACKGROUND_THREAD, docs/gate.md, section 2, item 5) ---------
# native threads a solution's calls started that may still be alive after a correctness call: a
# library's lazily started helpers (e.g. cuda-EvtHandlr)
CALL_THREADS_ALLOWED = 2
# native threads alive since the import, after each correctness call and the timed loop: the
# worker itself starts a few between calls (an honest MoE solution was once rejected for three), and
# a thread a call started can start more after the call returns (red-team case
# native_thread_trampoline)
THREADS_SINCE_LOAD_ALLOWED = 8

# every code a trace can carry, with one line each (docs/gate.md has the long form)
REASONS = {
    NON_FINITE: "NaN/inf in an output (an unwritten, poisoned element or an overflow)",
    TOLERANCE: "outside atol/rtol/required matched ratio",
    INTEGRITY_INCOMPLETE: "the worker could not snapshot the functions of the definition under evaluation, so a "
                          "hook on them would go unseen: not judged (a failure of the gate, not of the solution)",
    STRICT_TOLERANCE: "within the contest rule but outside the definition's strict rule: relative L2 error of an "
                      "output, or of its worst row, above the threshold (docs/gate.md, the strict verdict)",
    INVALID_INDEX: "indexer: an index outside its row's pages / beyond seq_len, or < -1",
    DUPLICATE_INDEX: "indexer: the same token id twice in a row",
    SHAPE: "output shape differs from the definition",
    DTYPE: "output dtype differs from the definition",
    MISSING_OUTPUT: "an output is missing",
    OUTPUT_COUNT: "a value-returning solution returned the wrong number of outputs",
    STALE_OUTPUT: "a sampled timed iteration's output is wrong for that iteration's inputs",
    GRAPH_STALE_OUTPUT: "a CUDA-graph replay's output is wrong for the replayed inputs",
    OUTPUT_PREWRITTEN: "an output buffer no longer held the poison right before the timed call: code ran in the "
                       "harness's window (a finalizer, a callback) and wrote it off the clock",
    INPUT_MUTATED: "an input changed (or was rebound to other storage) during a call",
    OUTPUT_NOT_TENSOR: "a returned output is not a plain strided torch.Tensor (subclass, wrapper, sparse, nested)",
    OUTPUT_WRONG_DEVICE: "a returned output lives on another device",
    OUTPUT_ALIASES_INPUT: "a returned output shares storage with an input",
    OUTPUT_REUSED: "a returned output is the storage returned by the previous call",
    BACKGROUND_THREAD: "threads started at import or left running after a call",
    CHILD_PROCESS: "child processes left running after a call",
    UNMEASURED_WORK: "device work outside the measured span (side stream): wall clock or CUPTI span >> events",
    NO_KERNELS: "the timed call ran none of the solution's own kernels",
    VENDOR_KERNELS: "most of the work ran in vendor-library / aten kernels",
    HOST_COMPUTE: "CPU: with Triton's stores dropped the call still produced the right outputs: the work "
                  "ran outside the solution's kernels",
    STREAM_SWITCHED: "the call returned with another CUDA stream current than the one it was called on: its "
                     "work, or its join of a private stream, would miss the harness's events",
    PHASE_MISMATCH: "the timed calls took far less time than the kernels the same solution ran where provenance "
                    "was observed: it runs other code when it is traced",
    BELOW_ROOFLINE: "faster than the physical floor at the device's peak: SUSPICIOUS",
    L2_PERSISTENCE: "the solution enabled persisting L2 lines: SUSPICIOUS",
    DEVICE_GRAPH_MISMATCH: "device time far below the CUDA-graph replay of the same call (it does less when "
                           "timed than when captured): SUSPICIOUS",
    TIMER_INCONSISTENT: "reported timings impossible next to the parent's wall clock",
    TIMER_TAMPERED: "a clock, CUDA event or synchronisation function was replaced in the worker",
    GATE_TAMPERED: "a gate, harness, IPC or builtin function was replaced in the worker",
    FILE_TAMPERED: "a protected file (gate/definition sources, results folder, kernelwright cache) changed",
    NONDETERMINISTIC: "a second run on the same inputs (other poison, churned allocator) disagrees",
    HIDDEN_SPLIT_FAILED: "fails on the held-out (hidden) workloads",
    WORKER_CRASHED: "the worker process died",
    WORKER_INIT: "the worker could not set up its harness, before any solution was loaded (a failure of the gate, "
                 "not of the solution)",
    EXCEPTION: "the solution raised",
    TIMEOUT: "no reply within the time limit (a call past the per-call limit, --timeout)",
    WORKLOAD_INPUT: "a workload's input could not be had as the definition says (a missing safetensors file or "
                    "tensor key, another shape or dtype, a broken constraint, a blob changed during the run)",
    REFERENCE_FAILED: "the definition's reference raised on the workload's inputs",
    BUILD_FAILED: "the solution did not import/compile",
}


@dataclass(frozen=True)
class ScanFinding:
    code: str
    message: str


_PATTERNS = [
    (r"\bsys\s*\.\s*_getframe\b|\binspect\b\s*\.\s*(currentframe|stack|getouterframes)|\bf_back\b|\bf_locals\b",
     "FRAME_INTROSPECTION", "frame introspection (can read the caller's variables)"),
    (r"\bgc\s*\.\s*(get_objects|get_referrers|get_referents)\b", "GC_INTROSPECTION",
     "garbage-collector introspection (can find other objects in the process)"),
    (r"\bimport\s+threading\b|\bfrom\s+threading\b|\b_thread\b|\bconcurrent\.futures\b",
     "THREADING", "threads (work can escape the measured call)"),
    (r"\bmultiprocessing\b|\bsubprocess\b|\bos\s*\.\s*(fork|system|popen|spawn\w*)\b",
     "PROCESSES", "child processes or shell commands"),
    (r"\bctypes\b|\bcffi\b", "CTYPES", "ctypes/cffi (raw memory and library access)"),
    (r"_enable_record_function|_toggle_collection_dynamic|_(?:enable|disable|prepare)_profiler",
     "PROFILER_CONTROL", "switches the profiler or RecordFunction (the gate's record of host ops on CPU)"),
    (r"\bkernelwright\b", "IMPORTS_GATE", "imports kernelwright (the gate, references or inputs)"),
    (r"\b(flashinfer|deep_gemm|flash_mla|vllm|sgl_kernel|sglang|_flashmla_C)\b", "VENDOR_LIBRARY",
     "calls a vendor kernel library"),
    (r"torch\s*\.\s*(matmul|mm|bmm|einsum|addmm|baddbmm)\b|F\s*\.\s*(linear|scaled_dot_product_attention)\b|\.matmul\(",
     "TORCH_MATMUL", "uses torch matmul/attention (cuBLAS/cuDNN), not its own kernel"),
    (r"torch\s*\.\s*cuda\s*\.\s*(Stream|ExternalStream)\b|cudaStream", "SIDE_STREAM", "creates CUDA streams"),
    (r"\bopen\s*\(|\bPath\s*\(|\bshutil\b|\bos\s*\.\s*(remove|unlink|rename|replace|write)\b", "FILE_IO",
     "file access (could edit files outside the solution)"),
    (r"cudaCtxResetPersistingL2Cache|accessPolicyWindow|cudaLimitPersistingL2CacheSize|access_policy_window",
     "L2_PERSISTENCE", "L2 persistence controls"),
    (r"\bos\s*\.\s*environ\b|\bgetenv\b", "ENVIRONMENT", "reads or writes environment variables"),
    (r"torch\s*\.\s*cuda\s*\.\s*(Event|synchronize)\b|\btime\s*\.\s*(perf_counter|time)\b", "TIMER_ACCESS",
     "touches timers or synchronisation"),
    (r"\bdata_ptr\s*\(\)|\bid\s*\(", "IDENTITY_KEYS", "uses tensor addresses or object ids (cache keys?)"),
    (r"\bglobal\s+\w+|_cache\b|lru_cache|functools\.cache", "MODULE_STATE", "module-level state or caches"),
    (r"^\s*(torch|time|statistics|threading|builtins|multiprocessing|kernelwright)(\.\w+)+\s*=[^=]|\bsetattr\s*\(|"
     r"\.__code__\s*=|\bsys\s*\.\s*modules\b", "MONKEYPATCH",
     "rebinds attributes of torch/time/stdlib/gate modules (timer or harness patching?)"),
    (r"\bcudaStreamSetAttribute\b|\bcudaDeviceSetLimit\b", "CUDA_RUNTIME_CONTROL",
     "changes CUDA stream attributes or device limits"),
    (r"\b__import__\s*\(|\bimportlib\b|\bexec\s*\(|\beval\s*\(|\bcompile\s*\(", "DYNAMIC_CODE",
     "dynamic imports or code execution (hides what the solution runs)"),
]


def static_scan(sources: Mapping[str, str]) -> List[ScanFinding]:
    """Advisory scan of solution sources for patterns known from reward hacks.

    Findings are warnings in the trace, never verdicts: legitimate kernels can match some of them
    (e.g. a Triton launcher that caches compiled configs).
    """
    findings: Dict[str, ScanFinding] = {}
    for path, text in sources.items():
        code_only = _strip_comments(text, path)
        for pattern, code, message in _PATTERNS:
            if code == "TORCH_MATMUL" and not path.endswith(".py"):
                continue
            if code in findings:
                continue
            m = re.search(pattern, code_only, re.M)
            if m:
                line = code_only[: m.start()].count("\n") + 1
                findings[code] = ScanFinding(code, f"{path}:{line}: {message}")
    return list(findings.values())


def _strip_comments(text: str, path: str) -> str:
    if not path.endswith(".py"):
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    # drop docstrings and comments: keep only code lines
    doc_lines = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            doc_lines.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if i in doc_lines:
            out.append("")
            continue
        out.append(line.split("#", 1)[0] if "#" in line and "'" not in line and '"' not in line else line)
    return "\n".join(out)


# -- process-level observations ------------------------------------------------------------
def native_thread_count() -> int:
    """Threads of this process (all, native included) from /proc; -1 where unavailable."""
    try:
        with open(f"/proc/{os.getpid()}/status") as fh:
            for line in fh:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def native_thread_names() -> Dict[int, str]:
    """{thread id: kernel thread name (``comm``)} of this process's threads from /proc; empty
    where unavailable.  Names tell a library's lazily started threads (``cuda-EvtHandlr``,
    ``llvm-worker-*``) from a solution's own."""
    names: Dict[int, str] = {}
    base = f"/proc/{os.getpid()}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return names
    for tid in tids:
        try:
            with open(f"{base}/{tid}/comm") as fh:
                names[int(tid)] = fh.read().strip()
        except (OSError, ValueError):
            continue
    return names


def child_process_count() -> int:
    """Live processes this process started, zombies excluded; -1 where unavailable.  When this
    process leads its own session (the worker calls ``os.setsid`` at start), every process of
    that session counts, so a grandchild that outlives its parent (a double-forked daemon) is
    still seen; otherwise the direct children."""
    pid = os.getpid()
    try:
        leader = os.getsid(0) == pid
    except OSError:
        leader = False
    count = 0
    try:
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == pid:
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()   # state, ppid, pgrp, session, ...
                mine = int(fields[3]) == pid if leader else int(fields[1]) == pid
                if mine and fields[0] != "Z":
                    count += 1
            except (OSError, IndexError, ValueError):
                continue
    except OSError:
        return -1
    return count


def storage_span(t: torch.Tensor):
    """(first, end) byte address of ``t``'s storage, through the classes' methods: a solution can
    set attributes on the tensors and storages it is handed (see worker.guard_plain_tensors)."""
    st = torch.Tensor.untyped_storage(t)
    start = torch.UntypedStorage.data_ptr(st)
    return start, start + torch.UntypedStorage.nbytes(st)


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device:
        return False
    a0, a1 = storage_span(a)
    b0, b1 = storage_span(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


def data_span(t: torch.Tensor):
    """(first, end) byte address of the elements ``t`` views (contiguous ``t``), through the
    class's methods."""
    start = torch.Tensor.data_ptr(t)
    return start, start + torch.Tensor.numel(t) * torch.Tensor.element_size(t)


def buffer_sets_problem(sets, count: int, input_meta, output_meta, device: torch.device) -> Optional[str]:
    """What is wrong with the buffer sets a worker's alloc reply hands the parent, or None.

    ``sets``: ``count`` dicts ``{"inputs": [...], "outputs": [...]}`` of plain contiguous tensors
    on ``device`` with the shapes and dtypes of ``input_meta`` (tensor inputs only; ``(name,
    shape|None, dtype name)``) and ``output_meta``, no two of them sharing a byte.  A forged reply
    that aliased two buffers would let the parent's fill of one set, or the poison of an output,
    land in another."""
    ins = [(n, shape, dt) for n, shape, dt in input_meta if shape is not None]
    if not isinstance(sets, list) or len(sets) != count:
        return f"expected {count} buffer sets, got {type(sets).__name__} of {len(sets) if isinstance(sets, list) else '?'}"
    spans = []
    for k, st in enumerate(sets):
        if not isinstance(st, dict) or set(st) != {"inputs", "outputs"}:
            return f"buffer set {k} is not an inputs/outputs record"
        for role, meta in (("inputs", ins), ("outputs", output_meta)):
            got = st[role]
            if not isinstance(got, list) or len(got) != len(meta):
                return f"buffer set {k}: {role} is not a list of {len(meta)} tensors"
            for (name, shape, dt), t in zip(meta, got):
                where = f"buffer set {k}, {role[:-1]} {name!r}"
                if type(t) is not torch.Tensor:
                    return f"{where} is a {type(t).__name__}, not a plain tensor"
                if t.device != device or list(t.shape) != list(shape) or t.dtype != getattr(torch, dt):
                    return f"{where} is {t.dtype} {list(t.shape)} on {t.device}, expected {dt} {list(shape)} on {device}"
                if not t.is_contiguous():
                    return f"{where} is not contiguous"
                if t.numel():
                    spans.append((*data_span(t), where))
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            return f"{a} and {b} share memory"
    return None


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Exact equality of two tensors' bytes (NaN-safe)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return bool(torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


# -- kernel provenance ----------------------------------------------------------------------
_VENDOR = re.compile(r"cublas|nvjet|xmma|cudnn|cutlass|flash_fwd|flash_bwd|fmha|flashinfer|deep_gemm|"
                     r"flash_mla|flashmla|sm90_gemm|sm80_gemm|ampere_|volta_|turing_|gemv|gemmk|splitk", re.I)
_TORCH = re.compile(r"^aten::|at::|at_cuda_detail|c10::|elementwise_kernel|reduce_kernel|index_elementwise|"
                    r"vectorized_|unrolled_elementwise|cunn_|radixSort|gatherTopK|sort_|scatter_gather|"
                    r"CatArrayBatchedCopy|indexSelect|fill_kernel|copy_kernel", re.I)
_TORCH_CPU_COMPUTE = re.compile(r"^(?:aten|torch)::(mm|bmm|matmul|addmm|baddbmm|linear|_scaled_mm|einsum|topk|sort|"
                                r"softmax|_softmax|log_softmax|logsumexp|sigmoid|exp|relu|index_add_|"
                                r"scaled_dot_product_attention|_scaled_dot_product\w*|conv\w*|rms_norm|_fused_rms_norm|layer_norm|"
                                r"native_layer_norm|group_norm|batch_norm|argsort|silu|gelu|softplus|embedding|"
                                r"multi_head_attention_forward|subclass_torch_function|"
                                # functions that run Python code (host_op_name), and C ops that
                                # run Python callables or the autograd engine, unseen by the
                                # recorder while they run (case recorder_apply_callback)
                                r"python_function|apply_|map_|map2_|backward|"
                                # an op on tensor lists, whose elements the host-op profile cannot
                                # count (aten_ops._recorded_name), and the fused optimizer kernels
                                r"tensor_list|_foreach_\w+|_fused_\w+|"
                                # an op on a nested tensor (aten_ops._on_nested)
                                r"nested)(?:\.\w+)?$")   # any overload (torch.ops.aten.mm.default)


# ops a solution's host code may run around its kernels on CPU without doing the work itself:
# allocation, copies and casts, views/indexing, metadata, scalars
_CPU_GLUE = re.compile(
    r"^(?:aten|torch)::(empty\w*|new_\w+|zeros\w*|ones\w*|full\w*|fill_|zero_|copy_|clone|contiguous|_to_copy|to|"
    r"_copy_from\w*|lift\w*|detach\w*|alias|view\w*|_unsafe_view|reshape|_reshape\w*|as_strided\w*|"
    r"expand\w*|permute|transpose\w*|t|t_|squeeze\w*|unsqueeze\w*|select|slice|narrow|split\w*|chunk|"
    r"unbind|flatten|unflatten|movedim|set_|resize_\w*|_local_scalar_dense|item|is_nonzero|"
    r"arange|cat|stack|index_select|_has_compatible_shallow_copy_type|record_stream|result_type|"
    r"sym_\w+|size|stride|numel|dim|is_contiguous|storage_offset|_nested\w*|unfold|diagonal|"
    r"real|imag|conj\w*|_conj|_neg_view|resolve_\w+|"
    r"float|half|bfloat16|double|int|long|short|bool|byte|char|type|type_as|cpu|cuda|"
    r"getitem|setitem|len|iter|index|format|repr|hash|"
    r"data_ptr|untyped_storage|element_size|nbytes|itemsize|get_device|tolist|"
    r"requires_grad_|dim_order|storage|is_\w+|\w*__get__|\w*__set__|"
    r"new_tensor|tensor|as_tensor|from_numpy|numpy)$")


def op_name(func) -> str:
    """A torch function's or tensor method's name without dunder underscores (``__mul__`` ->
    ``mul``, ``__rmatmul__`` -> ``matmul``, a property getter -> ``<owner>__get__``)."""
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":
        owner = getattr(func, "__self__", None)
        name = (getattr(owner, "__name__", "") or "attr") + "__get__"
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        name = name[2:-2]
        if name[:1] in ("r", "i") and name[1:] in ("add", "sub", "mul", "truediv", "floordiv", "matmul",
                                                   "pow", "mod", "and", "or", "xor"):
            name = name[1:]
    return name


def classify_kernel(name: str, own_names=None) -> str:
    """'solution' (one of the solution's own kernels), 'vendor' (cuBLAS/cuDNN/CUTLASS/library
    kernels) or 'torch' (aten kernels).  ``own_names``: the kernel names declared in the
    solution's sources (``own_kernel_names``); a kernel whose name contains one of them as an
    identifier is the solution's even if the name also looks like a vendor's (e.g. ``gemv``)."""
    if own_names and any(re.search(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])", name)
                         for n in own_names):
        return "solution"
    if name.startswith("triton::"):
        return "solution"
    return _pattern_origin(name) or "solution"


_GLOBAL_FN = re.compile(r"__global__\s+(?:[\w:<>,\s\*]+?\s+)?([A-Za-z_]\w*)\s*\(")


def own_kernel_names(sources: Mapping[str, str]) -> List[str]:
    """Kernel names a solution declares: Python functions decorated with ``triton.jit`` /
    ``autotune`` / ``heuristics`` (or any decorator naming ``jit``), and CUDA ``__global__``
    functions; used to attribute profiled kernels to the solution."""
    names = set()
    for path, text in sources.items():
        if path.endswith(".py"):
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                        re.search(r"jit|autotune|heuristics", ast.unparse(d)) for d in node.decorator_list):
                    names.add(node.name)
        else:
            names.update(_GLOBAL_FN.findall(re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", text)))
    return sorted(n for n in names if len(n) >= 3)


def cpu_glue(name: str) -> bool:
    """Whether a recorded host op (``torch::op``) is glue a solution's host code may run around
    its kernels on CPU (allocation, copies, casts, views, metadata): ``_CPU_GLUE``."""
    return bool(_CPU_GLUE.match(name))


# what torch's C side hands a torch function mode: builtin functions and methods, method and slot
# descriptors (TensorBase's methods, a C property's getter), aten operators (torch.ops.aten.mm.default)
_C_CALLABLES = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                types.MethodWrapperType, types.ClassMethodDescriptorType, torch._ops.OpOverload,
                torch._ops.OpOverloadPacket)
_HEAPTYPE = 1 << 9      # Py_TPFLAGS_HEAPTYPE: a class a class statement made (not one written in C)
# torch's operators written in Python (``t // 2``, ``t ** 2``, ``1 - t``): each runs one aten op on
# its operands, whose elements the recorder counts
_PY_OPERATORS = tuple(getattr(torch.Tensor, n) for n in (
    "__floordiv__", "__rfloordiv__", "__pow__", "__ipow__", "__rpow__", "__rsub__", "__rdiv__",
    "__rtruediv__", "__rmod__", "__rlshift__", "__rrshift__", "__rmatmul__"))


def _written_in_c(func) -> bool:
    """Whether a callable the mode is handed is C code: one of ``_C_CALLABLES`` or a class written
    in C (``torch.device``, ``torch.Size``)."""
    if any(type(func) is c for c in _C_CALLABLES):
        return True
    return issubclass(type(func), type) and not type.__dict__["__flags__"].__get__(func) & _HEAPTYPE


def host_op_name(func) -> str:
    """The host-op recorder's name for a torch function or tensor method: ``torch::<op_name>``, or
    ``torch::python_function.<op_name>``, a compute op (``_TORCH_CPU_COMPUTE``), for one that runs
    Python code (not C, ``_written_in_c``, nor one of the ``_PY_OPERATORS``) and is neither glue
    nor a compute op by its name.  The mode is off while its handler runs a function, so the torch
    work of that Python code is unseen: the backward of an ``autograd.Function`` that
    ``torch.autograd.grad`` runs, called directly or by ``torch.autograd.functional.vjp`` (cases
    recorder_autograd_grad, recorder_functional_vjp), the ``__deepcopy__`` of an object in a
    tensor's ``__dict__`` that ``Tensor.__deepcopy__`` calls (case recorder_deepcopy_hook)."""
    op = op_name(func)
    name = "torch::" + op
    if (cpu_glue(name) or _TORCH_CPU_COMPUTE.match(name) or _written_in_c(func)
            or any(func is f for f in _PY_OPERATORS)):
        return name
    return "torch::python_function." + (re.sub(r"\W", "_", op) or "_")


def cpu_provenance_verdict(launches: Mapping[str, List[float]], host_ops: Mapping[str, List[float]],
                           output_elements: int, min_launches: int = 1):
    """(reason or None, message) for a Triton solution evaluated on CPU (interpreter).

    ``launches``: Triton kernel launches of the observed calls ({name: [count, us]});
    ``host_ops``: aten ops the solution's host code ran (inside a launch, those Triton's own code did not call)
    ({"aten::op": [count, us, elements]}); ``min_launches``: the fewest launches of any
    correctness or timed call.  A call without a Triton launch -> NO_KERNELS; a torch compute
    op (matmul, topk, softmax, a function that runs Python code: ``host_op_name``, ...) or
    non-glue aten ops touching at least half as many
    elements as the outputs -> VENDOR_KERNELS (the host does the work, the kernel is a decoy).
    """
    if min_launches <= 0 or not launches:
        return NO_KERNELS, (f"a call launched no Triton kernel (fewest launches in one call: {min_launches}); "
                            f"host ops: {sorted(host_ops)[:6]}")
    heavy = sorted(n for n in host_ops if _TORCH_CPU_COMPUTE.match(n))
    if heavy:
        return VENDOR_KERNELS, f"the call runs torch compute ops {heavy[:5]} instead of its own kernels"
    compute = {n: v for n, v in host_ops.items() if not cpu_glue(n)}
    touched = sum(v[2] for v in compute.values() if len(v) > 2)
    if compute and touched >= 0.5 * max(1, output_elements):
        top = sorted(compute, key=lambda n: -compute[n][2])[:5]
        return VENDOR_KERNELS, (f"host torch ops (not the Triton kernels' own) touch {int(touched)} elements "
                                f"(outputs: {output_elements}): {top}")
    return None, ""


def _pattern_origin(name: str) -> str:
    """'vendor', 'torch' or '' (no pattern matches) for a kernel name."""
    if name.startswith("torch::"):
        return "torch"
    if _VENDOR.search(name):
        return "vendor"
    if _TORCH.search(name):
        return "torch"
    return ""


def _names_identifier(name: str, declared) -> bool:
    return any(re.search(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])", name) for n in declared)


def attribute_kernels(kernels: Mapping[str, List[float]], launched: Mapping[str, int] = None,
                      durations: Mapping[str, List[float]] = None, declared=()) -> Dict[str, Dict[str, float]]:
    """Who ran each kernel, by launch rather than by name: {name: {"solution":
    us, <origin>: us}} from CUPTI's {name: [count, total_us]}.

    - A name the gate saw the solution launch through Triton's launcher (``launched``: {name:
      launches}, recorded in the worker) is the solution's for as many records as it launched,
      the SHORTEST ones (``durations``: each record's us): a trivial kernel that takes a vendor
      kernel's name claims only its own time; the other records keep the name's pattern origin.
    - Otherwise vendor and aten patterns apply first: a declared name never turns a vendor or
      aten kernel into the solution's (a never-launched ``@triton.jit`` named like one did).
    - Otherwise a name containing a declared ``__global__`` function (``declared``: the CUDA
      sources' kernels, which Triton's launcher never sees) is the solution's.
    - Otherwise the name is 'unknown' when a launch record exists (not the solution's: every
      Triton kernel it launched is recorded), else 'solution' (no record: the profiler path)."""
    out: Dict[str, Dict[str, float]] = {}
    for name, (count, total) in kernels.items():
        count, total = int(count), float(total)
        pattern = _pattern_origin(name)
        if launched and launched.get(name):
            own_n = min(count, int(launched[name]))
            each = sorted(durations.get(name) or []) if durations else []
            own = sum(each[:own_n]) if len(each) == count else total * own_n / max(count, 1)
            out[name] = {"solution": own}
            if total - own > 1e-9:
                out[name][pattern or "unknown"] = total - own
        elif pattern:
            out[name] = {pattern: total}
        elif name.startswith("triton::") or (declared and _names_identifier(name, declared)):
            out[name] = {"solution": total}
        else:
            out[name] = {"unknown" if launched is not None else "solution": total}
    return out


def provenance_verdict(kernels: Mapping[str, List[float]], cpu_ops: bool = False, own_names=None,
                       launched: Mapping[str, int] = None, durations: Mapping[str, List[float]] = None):
    """(reason or None, message) from {name: [count, total_us]} of the traced calls.

    GPU: time attributed by ``attribute_kernels`` (``launched``: the Triton kernels the solution
    launched; ``own_names``: the ``__global__`` names of its CUDA sources); none of it the
    solution's -> NO_KERNELS; more than half of it foreign (vendor, aten or unknown) ->
    VENDOR_KERNELS.  CPU (``cpu_ops``: torch-profiler op names of one call): any aten compute
    op (matmul, topk, softmax, ...) -> VENDOR_KERNELS, since an interpreted Triton kernel runs
    no aten compute op (the Triton-aware CPU rule is ``cpu_provenance_verdict``).
    """
    if cpu_ops:
        used = sorted(n for n in kernels if _TORCH_CPU_COMPUTE.match(n))
        if used:
            return VENDOR_KERNELS, f"the call runs torch compute ops {used[:5]} instead of its own kernels"
        return None, ""
    split = attribute_kernels(kernels, launched, durations, own_names or ())
    total = sum(sum(v.values()) for v in split.values())
    own = {n: v["solution"] for n, v in split.items() if v.get("solution", 0) > 0}
    if not own:
        names = sorted(kernels)[:4]
        return NO_KERNELS, f"no kernel the solution launched itself ran in the traced calls (saw {names})"
    foreign = total - sum(own.values())
    if total > 0 and foreign > 0.5 * total:
        top = sorted(((sum(x for k, x in v.items() if k != "solution"), n) for n, v in split.items()), reverse=True)[:3]
        return VENDOR_KERNELS, (f"{100 * foreign / total:.0f}% of kernel time in kernels the solution did not launch "
                                f"(vendor/aten/unknown): {[n for _, n in top]}")
    return None, ""


def kernel_origin(name: str, split: Mapping[str, Dict[str, float]]) -> str:
    """The origin of most of a kernel name's time (``attribute_kernels``): solution, vendor,
    torch or unknown."""
    parts = split.get(name) or {}
    return max(parts, key=parts.get) if parts else "unknown"


PHASE_MIN_RATIO = 0.8
"""PHASE_MISMATCH: a trial's timed calls may take down to this fraction of the kernel time its
traced calls ran on the same inputs (median over the pairs, ``phase_ratio``).  An honest call's
events cover at least that kernel time, so its ratio sits near 1 or above; a switch to cheaper
code where timed (case ``phase_switch``) reads below, and so does work moved off the clock after
trial 0 (case ``split_later_trials``: 0.55x)."""


def phase_ratio(latency_ms, kernel_sum_ms, kernel_span_ms) -> Optional[float]:
    """The median over pairs of a timed call's latency against the traced call's kernel time on
    the same inputs, min(sum, span) (dimensionless: ms / ms); None without a pair that traced
    any kernel.  ``latency_ms[i]`` is the CUDA-event latency of a timed call, ``kernel_sum_ms[i]``
    and ``kernel_span_ms[i]`` the CUPTI kernel-duration sum and first-start-to-last-end span of
    the traced call on the same inputs (all ms).  An honest call's events cover at least
    min(sum, span): on one stream at least the sum, with overlapping streams at least the span.
    The span alone is not a floor: CUPTI slows every launch, so a launch-bound honest solution
    shows a traced span about twice its timed latency (H200, red-team case ``ghost_branch``)."""
    ratios = [timed / traced for timed, traced in _timed_and_traced(latency_ms, kernel_sum_ms, kernel_span_ms)]
    return float(statistics.median(ratios)) if ratios else None


def _timed_and_traced(latency_ms, kernel_sum_ms, kernel_span_ms):
    """[(timed latency, traced kernel time min(sum, span))] in ms, of the pairs whose traced call
    ran a kernel."""
    pairs = [(t, min(a, b)) for t, a, b in zip(latency_ms, kernel_sum_ms, kernel_span_ms)]
    return [(t, w) for t, w in pairs if w > 0]


def phase_verdict(latency_ms, kernel_sum_ms, kernel_span_ms, threshold: float = PHASE_MIN_RATIO):
    """(PHASE_MISMATCH or None, message): the timed calls against the traced calls of the same
    inputs (``phase_ratio``; lists of ms, pair by pair).  A median ratio below ``threshold`` means
    the timed calls ran less work than the traced ones (case ``phase_switch``: own kernels where
    traced, other code where timed)."""
    median = phase_ratio(latency_ms, kernel_sum_ms, kernel_span_ms)
    if median is None or median >= threshold:
        return None, ""
    timed, traced = _timed_and_traced(latency_ms, kernel_sum_ms, kernel_span_ms)[0]
    return PHASE_MISMATCH, (f"on the same inputs the timed calls took {median:.2f}x the kernel time of the traced "
                            f"calls (first pair: {timed:.4f} ms vs {traced:.4f} ms)")


def phase_verdict_by_trial(pairs_by_trial, threshold: float = PHASE_MIN_RATIO):
    """(PHASE_MISMATCH or None, message): ``phase_verdict`` on each trial's own pairs, the first
    trial that fails decides.  ``pairs_by_trial[t]`` is trial ``t``'s (timed latencies, kernel
    sums, kernel spans), all ms, of its own held calls as CUPTI traced them
    (``headline.phase_pairs``); a trial without pairs (nothing traced, no kernel) is not judged here.
    Each trial is compared only with itself, so a workload whose cost differs between trials
    (MoE at T = 1: a token hits local experts or not) cancels pair by pair, and a later trial
    that times less work than its traced calls show (case ``split_later_trials``) fails at the
    same threshold as trial 0."""
    for t, pairs in enumerate(pairs_by_trial):
        reason, message = phase_verdict(*pairs, threshold=threshold)
        if reason is not None:
            return reason, f"trial {t}: {message}"
    return None, ""


TRIAL_PHASE_THRESHOLD = 0.25
"""The backstop across trials (``trial_phase_verdict``): a later trial whose median timed latency
is below this fraction of the reference (the smaller of trial 0's median and trial 0's traced
kernel time, min(sum, span)) measured less work than ran: PHASE_MISMATCH.  Every trial is also
paired with its own traced calls (``phase_verdict_by_trial``, at ``PHASE_MIN_RATIO``); this bound
compares *different* draws, so it stays loose: on a workload whose cost is bimodal (MoE at T = 1,
where a token's experts are often none of the local ones) trial 0's few traced calls can sit in
the slow mode while every trial's median sits in the fast one (the DeepGEMM pipeline's honest
trials read 0.45x of it on the H200), and an honest trial's median falls to the other
mode when most of its iterations do; the modes differ by less than 4x there."""


def trial_phase_verdict(per_trial_ms, kernel_sum_ms: float, kernel_span_ms: float,
                        threshold: float = TRIAL_PHASE_THRESHOLD):
    """(PHASE_MISMATCH or None, message): every later trial's median latency (ms) against the
    smaller of trial 0's median and trial 0's traced kernel time (``kernel_sum_ms``,
    ``kernel_span_ms``: medians of its traced calls, ms).  A backstop beside ``phase_verdict_by_trial``,
    which pairs every held call with its own records: this one still bounds a later trial whose tracing
    gave no pairs (a CUPTI error in that trial), and a clock fooled after trial 0 (red-team case
    ``held_side_stream``: a later trial's events missed a private stream's work, 1.3 µs against
    200 µs of kernels) shows here too."""
    if not per_trial_ms:
        return None, ""
    work = min(kernel_sum_ms, kernel_span_ms)
    reference = min(per_trial_ms[0], work) if work > 0 else per_trial_ms[0]
    if reference <= 0:
        return None, ""
    low = [(t, ms) for t, ms in enumerate(per_trial_ms) if t > 0 and ms < threshold * reference]
    if not low:
        return None, ""
    t, ms = low[0]
    return PHASE_MISMATCH, (f"trial {t} timed {ms:.4f} ms per call, {ms / reference:.2f}x the {reference:.4f} ms of "
                            f"trial 0 and the traced calls' kernel time")


EAGER_KERNEL_MIN_RATIO = 0.8
"""PHASE_MISMATCH on an eager headline (``eager_kernel_verdict``): a trial's eager median (its idle
calls, which CUPTI does not trace) may fall to this fraction of the kernel time the same trial's
traced held calls ran, min(sum, span).  An honest call's events wait for every kernel it joins, so
its eager latency covers that kernel time plus its host launch path; it reads a little below only
where CUPTI's cost on the traced kernels and the two halves' different draws weigh more than the
launch path (honest MoE at 1.9 ms on the H200: 0.96).  Below it, the idle calls' events missed
work the traced calls show (case ``eager_refused_idle_unjoined``: device time refused on purpose
by a copy, the work moved onto a private stream never joined back in the idle calls)."""


def eager_kernel_verdict(eager_ms, windows, threshold: float = EAGER_KERNEL_MIN_RATIO):
    """(PHASE_MISMATCH or None, message): each trial's eager median ``eager_ms[t]`` (ms) against its
    own traced calls' kernel time ``windows[t]`` = (median kernel sum, median span) in ms, or None
    where the trial traced nothing (not judged).  For an eager headline: the idle calls that time
    it are not traced, so this bound is what ties them to the kernels the solution runs."""
    for t, (ms, window) in enumerate(zip(eager_ms, windows)):
        work = min(window) if window else 0.0
        if work > 0 and ms < threshold * work:
            return PHASE_MISMATCH, (f"trial {t}: the eager latency {ms:.4f} ms is {ms / work:.2f}x the {work:.4f} ms "
                                    "of kernels its traced calls ran: the idle calls' events missed work "
                                    "(a private stream never joined back?)")
    return None, ""


# -- CUPTI's records of the traced calls (GATE_TAMPERED when they are not what the gate's tracer saw) --
UNRECORDED_LAUNCHES_ALLOWED = 0
"""GATE_TAMPERED (``unrecorded_launches``): how many of the Triton launches the worker's launch
counter saw inside the traced held calls (``LaunchCounter``: the JIT launcher, non-empty grids,
and replays of a graph they were captured into) may have no CUPTI kernel record of their name in
those calls.  Every such launch runs a kernel CUPTI records, so none: a missing record means CUPTI
was switched off around it (case ``cupti_disable_unjoined``) or its records were dropped."""


def unrecorded_launches(launched: Mapping[str, int], kernels: Mapping[str, List[float]],
                        allowed: int = UNRECORDED_LAUNCHES_ALLOWED) -> List[str]:
    """One message (or none) naming the kernels launched in the traced calls (``launched``: {name:
    launches}) with fewer CUPTI records there (``kernels``: {name: [count, total_us]}) than launches,
    beyond ``allowed`` in all."""
    missing = {name: int(n) - int((kernels.get(name) or [0])[0]) for name, n in launched.items()}
    missing = {name: n for name, n in missing.items() if n > 0}
    if sum(missing.values()) <= allowed:
        return []
    return [f"{sum(missing.values())} Triton launch(es) of the traced calls have no CUPTI record: "
            f"{sorted(missing.items())[:4]} (CUPTI switched off around them?)"]


def missing_hold_records(released: List[bool], held: List[bool]) -> List[str]:
    """One message (or none) when a traced call whose hold the host released (``released``, the
    parent's own record of the iteration) has no record of the gate's hold kernel (``held``: the
    worker's ``cupti_held``, call by call).  The hold is the gate's own kernel, launched with
    CUPTI on; without its record the tracer lost the call's records (switched off for good, its
    buffer callback replaced)."""
    if len(held) != len(released):
        return [f"CUPTI's hold records for {len(held)} traced calls, {len(released)} were held"]
    lost = [j for j, (r, h) in enumerate(zip(released, held)) if r and not h]
    return [f"traced call(s) {lost[:6]} have no record of the gate's hold kernel"] if lost else []


# -- protected files -------------------------------------------------------------------------
_PRECOMPILED: List[str] = []


def _precompile(pkg: str) -> None:
    """Write the package's missing or stale bytecode once per process, before any watched
    message: otherwise the first import of a module inside a watched message (in the worker or
    the parent) would write a ``__pycache__`` file there and count as a change."""
    if pkg in _PRECOMPILED:
        return
    _PRECOMPILED.append(pkg)
    import compileall

    try:
        compileall.compile_dir(pkg, quiet=2, workers=1)
    except Exception:   # a read-only install: nothing will be written during the run either
        pass


def protected_roots(out_dir=None) -> List[str]:
    """What no solution may change: the whole kernelwright package (the sources that make
    verdicts — gate, definitions with their references and tolerances, input synthesis, trace
    model — and also the shipped solutions, the baselines and the report code: a solution that
    edits a rival's or the report's source at import would change later runs; red-team case
    ``edit_shipped``), the kernelwright cache (device ceilings, hidden salt) and, when given, the
    run's results folder.  The package's bytecode is compiled first (``_precompile``).

    ``KERNELWRIGHT_PROTECT_SOURCES=0`` leaves the sources out (a shared development checkout
    where people edit them while runs are in progress: the gate cannot tell who changed a
    file).  Final evaluations should run with the default."""
    import kernelwright
    from kernelwright.gate.device_info import cache_dir

    pkg = os.path.dirname(os.path.abspath(kernelwright.__file__))
    roots = [pkg]
    if os.environ.get("KERNELWRIGHT_PROTECT_SOURCES", "1") == "0":
        roots = []   # a shared development checkout where people edit these files during runs
    else:
        _precompile(pkg)
    roots.append(str(cache_dir()))
    if out_dir is not None:
        roots.append(os.path.abspath(str(out_dir)))
    return roots


def cache_root() -> str:
    """The kernelwright cache (device ceilings, hidden salt): hidden from bounded workers."""
    from kernelwright.gate.device_info import cache_dir

    return os.path.abspath(str(cache_dir()))


def site_dirs() -> List[str]:
    """The interpreter's site-packages directories (where a ``.pth`` file runs at every start)."""
    import site

    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        dirs.append(user)
    return [os.path.abspath(d) for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def boundary_readonly_dirs() -> List[str]:
    """Directories a bounded worker must not be able to write (its self-test tries each): the
    kernelwright package and the site-packages directories."""
    import kernelwright

    return [os.path.dirname(os.path.abspath(kernelwright.__file__))] + site_dirs()


def boundary_hidden_dirs(results_dir=None, log_dir=None) -> List[str]:
    """Directories a bounded worker must not see (``sandbox.plan_launch``'s ``hide``: each covered
    by an empty tmpfs no uid can enter, and the worker's self-test tries to list each): the
    kernelwright cache (device ceilings, hidden salt), the run's results folder (traces, other
    candidates' sources and traces, summary.json with the run's nonce) and the worker logs.  The
    parent watches the same folders from outside (``protected_roots``), unaffected."""
    dirs = [cache_root()] + [os.path.abspath(str(d)) for d in (results_dir, log_dir) if d is not None]
    return list(dict.fromkeys(dirs))


def boundary_secret_files() -> List[str]:
    """Files a bounded worker must not be able to read (its self-test tries each): the hidden
    split's salt, when it exists."""
    salt = os.path.join(cache_root(), "hidden_salt")
    return [salt] if os.path.exists(salt) else []


def snapshot_files(roots, exclude=(), exclude_dirs=()) -> Dict[str, tuple]:
    """{path: (size, mtime_ns, ctime_ns, inode)} of every file under ``roots`` (a root may be a
    single file), except the files
    ``exclude`` and everything under ``exclude_dirs`` (the run's worker logs: every worker may
    write its own log at any time, so a change there says nothing about the solution being
    judged).  ctime cannot be set from user space, so an edit that restores the mtime still shows."""
    found: Dict[str, tuple] = {}
    skip = {os.path.abspath(e) for e in exclude}
    skip_dirs = {os.path.abspath(d) for d in exclude_dirs}
    for root in roots:
        if not os.path.exists(root):
            found[root] = ("absent",)
            continue
        if not os.path.isdir(root):   # a single protected file (a definition JSON, a workload's blob)
            st = os.lstat(root)
            found[root] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            if os.path.abspath(dirpath) in skip_dirs:
                dirnames[:] = []
                continue
            dirnames[:] = [d for d in dirnames if os.path.abspath(os.path.join(dirpath, d)) not in skip_dirs]
            st = os.lstat(dirpath)
            found[dirpath + os.sep] = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            for name in filenames:
                path = os.path.join(dirpath, name)
                if path in skip:
                    continue
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                found[path] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    return found


def snapshot_startup_files() -> Dict[str, tuple]:
    """{path: (size, mtime_ns, ctime_ns, inode)} of what Python runs at every start from the
    site-packages directories: ``*.pth`` files and ``sitecustomize`` / ``usercustomize``
    modules (site(7)), plus each directory's own entry (a file added or removed shows).  A
    solution that plants one weakens every later run, the gate's own included (case ``plant_pth``);
    behind the OS boundary the write is refused, without it this snapshot reports it
    (FILE_TAMPERED).  Only these names: the directories themselves change when a package is
    installed, and nobody installs during a run."""
    found: Dict[str, tuple] = {}
    for directory in site_dirs():
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        hooks = sorted(n for n in names if n.endswith(".pth") or n.split(".")[0] in ("sitecustomize", "usercustomize"))
        found[directory + os.sep + "<start-up files>"] = tuple(hooks)
        for name in hooks:
            try:
                st = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            found[os.path.join(directory, name)] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    return found


def changed_files(before: Mapping[str, tuple], after: Mapping[str, tuple]) -> List[str]:
    """Paths added, removed or modified between two snapshots (directories: entries added or
    removed, shown with a trailing separator)."""
    paths = set(before) | set(after)
    return sorted(p for p in paths if before.get(p) != after.get(p))
