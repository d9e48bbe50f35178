"""Which CUDA step fails for a worker behind the gate's boundary (issue 22): run once as root and
once per privilege drop by scripts/h200.sh's ``boundary-probe`` stage.  Prints one line per step
(device init, a device tensor, torch's pinned memory, the stream hold's mapped host memory
``cuMemHostAlloc(PORTABLE | DEVICEMAP)``) with ok or the error, and the RLIMIT_MEMLOCK in force."""

import resource
import sys


def step(name, fn):
    try:
        fn()
        print(f"{name}: ok", flush=True)
    except Exception as exc:   # a probe: every failure is the answer
        print(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}", flush=True)


def main() -> None:
    import os

    print("uid", os.getuid(), "memlock", resource.getrlimit(resource.RLIMIT_MEMLOCK), flush=True)
    import torch

    step("device tensor", lambda: torch.ones(4, device="cuda").sum().item())
    step("pin_memory 1 MiB", lambda: torch.empty(1 << 20, dtype=torch.uint8).pin_memory())

    def mapped():
        from cuda.bindings import driver as cu

        err, ptr = cu.cuMemHostAlloc(64, 0x01 | 0x02)
        if int(err) != 0:
            raise RuntimeError(f"cuMemHostAlloc: {err}")
        err, dev = cu.cuMemHostGetDevicePointer(ptr, 0)
        if int(err) != 0:
            raise RuntimeError(f"cuMemHostGetDevicePointer: {err}")

    step("mapped host memory", mapped)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
