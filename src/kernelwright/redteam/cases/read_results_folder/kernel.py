"""Reading the run's results folder (H12/H17): at import, finds the results folder through its own
log file (/proc/self/fd/1 -> <results>/logs/...), lists it and reads every file there outside the
logs: summary.json (``meta.config.nonce``: in a folder a run wrote into before, or written while
this worker lives, the nonce predicts every timed input), candidates.json, a rival's traces and
its solution's sources (``solutions/``).  The red-team runner evaluates it in a results folder laid
out as a bench's default one (``Case.bench_results``: under ``kw-results/`` in the working
directory, outside the private /tmp, with a summary.json and a rival's trace).  Raises "BOUNDARY
BREACHED" if the folder can be listed or any file read (BUILD_FAILED), else computes honestly.
Expected: PASS behind the boundary (the results folder is hidden like the cache: an empty tmpfs
its uid cannot enter); BUILD_FAILED without it, where the folder is readable by file mode.
"""

import os

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


def _results_folder():
    try:
        return os.path.dirname(os.path.dirname(os.readlink("/proc/self/fd/1")))
    except OSError:
        return None


def _probe():
    results = _results_folder()
    if not results:
        return
    leaked = []
    try:
        leaked.append(f"listed {results}: {sorted(os.listdir(results))[:8]}")
    except OSError:
        pass
    for dirpath, dirnames, filenames in os.walk(results):
        dirnames[:] = [d for d in dirnames if d != "logs"]        # its own log is no secret
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                with open(path, "rb") as fh:
                    leaked.append(f"read {path}: {fh.read(80)!r}")
            except OSError:
                pass
    if leaked:
        raise RuntimeError(f"BOUNDARY BREACHED: {leaked}")


_probe()


def run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
