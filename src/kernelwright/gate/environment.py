"""The environment a trace was measured in (flashinfer-bench ``Environment``)."""

from __future__ import annotations

import platform
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict

import torch

import kernelwright
from kernelwright.trace import Environment


@lru_cache(maxsize=4)
def environment(device: str) -> Environment:
    dev = torch.device(device)
    libs = {"torch": torch.__version__, "python": platform.python_version(),
            "kernelwright": kernelwright.__version__}
    try:
        import triton

        libs["triton"] = triton.__version__
    except Exception:
        pass
    if dev.type == "cuda":
        hardware = torch.cuda.get_device_name(dev)
        libs["cuda"] = str(torch.version.cuda)
        try:
            import subprocess

            drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10).stdout.strip().splitlines()
            if drv:
                libs["driver"] = drv[0]
        except Exception:
            pass
    else:
        hardware = f"CPU {platform.machine()} ({platform.processor() or 'unknown'})"
    libs["platform"] = sys.platform
    return Environment(hardware=hardware, libs=libs)


def source_revision() -> Dict[str, Any]:
    """Which code is running: the git commit of the checkout that holds the kernelwright package,
    whether its tree differs from that commit (``git status --porcelain``: tracked changes and
    untracked files not ignored), and the first 20 such paths.  Outside a git checkout (an
    installed wheel) ``commit`` and ``dirty`` are None and ``error`` says why."""
    root = Path(kernelwright.__file__).resolve().parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip().splitlines()[0] if done.stderr.strip() else f"git {args[0]} failed")
        return done.stdout

    try:
        top = git("rev-parse", "--show-toplevel").strip()
        commit = git("rev-parse", "HEAD").strip()
        changed = [line[3:] for line in git("status", "--porcelain").splitlines() if line.strip()]
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return {"commit": None, "dirty": None, "changed": [], "checkout": None,
                "error": f"not a git checkout ({exc})"}
    return {"commit": commit, "dirty": bool(changed), "changed": changed[:20], "checkout": top}
