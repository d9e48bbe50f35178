"""The environment a trace was measured in (flashinfer-bench ``Environment``)."""

from __future__ import annotations

import platform
import sys
from functools import lru_cache

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
