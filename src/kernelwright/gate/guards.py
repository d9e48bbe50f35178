"""Guard reason codes and the checks that do not need a GPU.

Every guard that rejects a solution writes one of these codes into ``GateReport.reasons``; the
verdict is the first failing guard.  Codes are stable strings (documented in docs/gate.md).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Mapping

import torch

# -- reason codes -------------------------------------------------------------------------
NON_FINITE = "NON_FINITE"                    # NaN/inf in an output (incl. an unwritten, poisoned element)
TOLERANCE = "TOLERANCE"                      # outside atol/rtol/matched ratio
STALE_OUTPUT = "STALE_OUTPUT"                # a sampled timed iteration's output is wrong for that input set
GRAPH_STALE_OUTPUT = "GRAPH_STALE_OUTPUT"    # a graph replay's output is wrong for the replayed inputs
INPUT_MUTATED = "INPUT_MUTATED"              # an input changed during the call
OUTPUT_NOT_TENSOR = "OUTPUT_NOT_TENSOR"      # returned object is not a plain torch.Tensor (subclass, wrapper)
OUTPUT_WRONG_DEVICE = "OUTPUT_WRONG_DEVICE"
OUTPUT_ALIASES_INPUT = "OUTPUT_ALIASES_INPUT"  # returned tensor shares storage with an input
OUTPUT_REUSED = "OUTPUT_REUSED"              # returned tensor is the storage returned by the previous call
BACKGROUND_THREAD = "BACKGROUND_THREAD"      # threads left running after the call
CHILD_PROCESS = "CHILD_PROCESS"              # child processes left running after the call
UNMEASURED_WORK = "UNMEASURED_WORK"          # device work outside the events' span (side stream)
NO_KERNELS = "NO_KERNELS"                    # the timed call launched none of the solution's own kernels
VENDOR_KERNELS = "VENDOR_KERNELS"            # most kernel time in vendor-library / aten kernels
BELOW_ROOFLINE = "BELOW_ROOFLINE"            # faster than the physical floor: SUSPICIOUS
TIMER_INCONSISTENT = "TIMER_INCONSISTENT"    # reported timings impossible next to the parent's wall clock
NONDETERMINISTIC = "NONDETERMINISTIC"        # two runs on the same inputs disagree beyond tolerance
HIDDEN_SPLIT_FAILED = "HIDDEN_SPLIT_FAILED"  # fails on held-out workloads
WORKER_CRASHED = "WORKER_CRASHED"
EXCEPTION = "EXCEPTION"


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
            m = re.search(pattern, code_only)
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


def child_process_count() -> int:
    """Live child processes of this process (zombies excluded); -1 where unavailable."""
    pid = os.getpid()
    count = 0
    try:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid and fields[0] != "Z":
                    count += 1
            except (OSError, IndexError, ValueError):
                continue
    except OSError:
        return -1
    return count


def storage_span(t: torch.Tensor):
    st = t.untyped_storage()
    return st.data_ptr(), st.data_ptr() + st.nbytes()


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device:
        return False
    a0, a1 = storage_span(a)
    b0, b1 = storage_span(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


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
_TORCH_CPU_COMPUTE = re.compile(r"^aten::(mm|bmm|matmul|addmm|baddbmm|linear|_scaled_mm|einsum|topk|sort|"
                                r"softmax|_softmax|log_softmax|logsumexp|sigmoid|exp|relu|index_add_|"
                                r"scaled_dot_product_attention|_scaled_dot_product\w*|conv\w*)$")


def classify_kernel(name: str) -> str:
    """'vendor' (cuBLAS/cuDNN/CUTLASS/library kernels), 'torch' (aten glue) or 'solution'."""
    if _VENDOR.search(name):
        return "vendor"
    if _TORCH.search(name):
        return "torch"
    return "solution"


def provenance_verdict(kernels: Mapping[str, List[float]], cpu_ops: bool = False):
    """(reason or None, message) from {name: [count, total_us]} of the timed call.

    GPU: no solution kernel -> NO_KERNELS; more than half the kernel time in vendor or aten
    kernels -> VENDOR_KERNELS.  CPU (``cpu_ops``: torch-profiler op names of one call): any aten
    compute op (matmul, topk, softmax, ...) -> VENDOR_KERNELS, since an interpreted Triton kernel
    runs no aten compute op.
    """
    if cpu_ops:
        used = sorted(n for n in kernels if _TORCH_CPU_COMPUTE.match(n))
        if used:
            return VENDOR_KERNELS, f"the call runs torch compute ops {used[:5]} instead of its own kernels"
        return None, ""
    total = sum(v[1] for v in kernels.values())
    own = {n: v for n, v in kernels.items() if classify_kernel(n) == "solution"}
    if not own:
        names = sorted(kernels)[:4]
        return NO_KERNELS, f"no kernel of the solution's own ran in the timed call (saw {names})"
    foreign = total - sum(v[1] for v in own.values())
    if total > 0 and foreign > 0.5 * total:
        top = sorted(((v[1], n) for n, v in kernels.items() if classify_kernel(n) != "solution"), reverse=True)[:3]
        return VENDOR_KERNELS, f"{100 * foreign / total:.0f}% of kernel time in vendor/aten kernels: {[n for _, n in top]}"
    return None, ""
