"""Build, on a machine WITHOUT a GPU, the FlashInfer JIT modules the baselines need (sm_90a),
and pack them as an ahead-of-time cache that FlashInfer on the GPU machine loads without
compiling.

    FLASHINFER_CUDA_ARCH_LIST=9.0a python -m kernelwright.baselines.prebuild \\
        --out .carry/flashinfer-cache [--modules topk,dsv3_routing,mla_fa3] [--jobs 2]

Needs flashinfer-python 0.6.13 + apache-tvm-ffi importable here (for this Python), nvcc, a C++
compiler and ninja.  The output folder holds a tiny package ``flashinfer_jit_cache`` (the name
of FlashInfer's own AOT wheel): with the output folder on PYTHONPATH, ``flashinfer.jit.env``
takes ``flashinfer_jit_cache.get_jit_cache_dir()`` as FLASHINFER_AOT_DIR, and every
``JitSpec.build_and_load()`` whose ``<name>/<name>.so`` is there loads it directly, with no
ninja and no nvcc (``JitSpec.is_aot``).  Modules missing from it still JIT as usual.

Why not carry the ordinary JIT cache (``FLASHINFER_WORKSPACE_BASE``)?  There, every load runs
ninja, and ninja rebuilds when the installed sources are newer than the objects (a fresh
``pip install --target`` on the GPU machine gives them a fresh mtime) or when build.ninja
differs (absolute paths of this machine).  The AOT route has neither problem.

Without a GPU driver there is no ``libcuda.so`` to link against (the CUDA wheels ship no stub);
a stub with soname ``libcuda.so.1`` is made in a temporary folder and passed through
``FLASHINFER_EXTRA_LDFLAGS`` so that the module records ``libcuda.so.1`` as NEEDED, which the
driver provides on the GPU machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

SHIM_VERSION_SUFFIX = "+kernelwright.sm90a"

SHIM_INIT = '''"""Ahead-of-time FlashInfer modules prebuilt by kernelwright.baselines.prebuild (sm_90a).

Not the flashinfer-jit-cache wheel: a stand-in with the same two attributes that
flashinfer.jit.env reads, so that FlashInfer loads the prebuilt modules in jit_cache/.
"""
import os

__version__ = "{version}"


def get_jit_cache_dir():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "jit_cache")
'''


def _specs() -> Dict[str, Callable[[], object]]:
    """name -> function returning the flashinfer JitSpec (imported lazily)."""

    def topk():
        from flashinfer.jit.topk import gen_topk_module
        return gen_topk_module()

    def dsv3_routing():
        from flashinfer.jit import gen_dsv3_fused_routing_module
        return gen_dsv3_fused_routing_module()

    def mla_fa3():
        import torch
        from flashinfer.jit.attention.modules import gen_batch_mla_module
        # the exact arguments BatchMLAPagedAttentionWrapper.plan passes for bf16 q/kv, int32 indptr
        return gen_batch_mla_module("fa3", torch.bfloat16, torch.bfloat16, torch.bfloat16,
                                    torch.int32, 512, 64, False)

    def fused_moe_90():
        from flashinfer.jit.fused_moe import gen_cutlass_fused_moe_sm90_module
        return gen_cutlass_fused_moe_sm90_module(False)

    return {"topk": topk, "dsv3_routing": dsv3_routing, "mla_fa3": mla_fa3,
            "fused_moe_90": fused_moe_90}


DEFAULT_MODULES = ["topk", "dsv3_routing", "mla_fa3"]


def _ensure_libcuda_stub() -> None:
    """Make ``-lcuda`` link on a machine without the driver (see the module docstring)."""
    probe = subprocess.run(["bash", "-c", "ldconfig -p | grep -q 'libcuda.so '"], check=False)
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if probe.returncode == 0 or Path(cuda_home, "lib64", "stubs", "libcuda.so").exists():
        return
    stub_dir = Path(tempfile.mkdtemp(prefix="kw-libcuda-stub-"))
    src = stub_dir / "stub.c"
    src.write_text("void kernelwright_libcuda_stub(void) {}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-Wl,--no-as-needed",
                    "-o", str(stub_dir / "libcuda.so"), str(src)], check=True)
    flags = os.environ.get("FLASHINFER_EXTRA_LDFLAGS", "")
    os.environ["FLASHINFER_EXTRA_LDFLAGS"] = f"{flags} -L{stub_dir}".strip()


def write_shim(out: Path, version: str) -> Path:
    pkg = out / "flashinfer_jit_cache"
    (pkg / "jit_cache").mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(SHIM_INIT.format(version=version + SHIM_VERSION_SUFFIX))
    return pkg / "jit_cache"


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(".carry/flashinfer-cache"))
    ap.add_argument("--modules", default=",".join(DEFAULT_MODULES),
                    help=f"comma-separated, from {sorted(_specs())}")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--include", type=Path, action="append", default=[],
                    help="extra header folder (e.g. the include/ of the nvidia-curand and "
                         "nvidia-cublas wheels when the CUDA toolkit here lacks curand.h/cublasLt.h)")
    ap.add_argument("--workspace", type=Path, default=None,
                    help="FLASHINFER_WORKSPACE_BASE for the build (default: a temp dir)")
    args = ap.parse_args(argv)

    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    os.environ.setdefault("MAX_JOBS", str(args.jobs))
    if "flashinfer" in sys.modules:
        print("prebuild: flashinfer was imported before the environment was set", file=sys.stderr)
        return 2
    workspace = args.workspace or Path(tempfile.mkdtemp(prefix="kw-fi-ws-"))
    os.environ["FLASHINFER_WORKSPACE_BASE"] = str(workspace)
    _ensure_libcuda_stub()
    if args.include:
        incs = " ".join(f"-isystem {p.resolve()}" for p in args.include)
        for var in ("FLASHINFER_EXTRA_CUDAFLAGS", "FLASHINFER_EXTRA_CFLAGS"):
            os.environ[var] = f"{os.environ.get(var, '')} {incs}".strip()

    import flashinfer  # noqa: F401  (after the environment is set)
    from flashinfer.jit import env as jit_env

    dest_root = write_shim(args.out, flashinfer.__version__)
    specs = _specs()
    status = 0
    for name in [m.strip() for m in args.modules.split(",") if m.strip()]:
        if name not in specs:
            print(f"prebuild: unknown module {name!r}", file=sys.stderr)
            status = 2
            continue
        t0 = time.time()
        try:
            spec = specs[name]()
            spec.build(verbose=os.environ.get("FLASHINFER_JIT_VERBOSE") == "1")
            so = spec.jit_library_path
            dest = dest_root / spec.name / f"{spec.name}.so"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(so, dest)
            print(f"prebuild: {name}: {spec.name}.so {dest.stat().st_size / 2**20:.1f} MiB "
                  f"in {time.time() - t0:.0f} s -> {dest}", flush=True)
        except Exception as exc:  # report and go on with the next module
            msg = str(exc).strip().splitlines()
            print(f"prebuild: {name}: FAILED after {time.time() - t0:.0f} s: "
                  f"{type(exc).__name__}: {msg[-1] if msg else ''}", flush=True)
            status = 1
    print(f"prebuild: JIT dir was {jit_env.FLASHINFER_JIT_DIR}")
    return status


if __name__ == "__main__":
    sys.exit(main())
