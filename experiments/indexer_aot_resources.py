"""Registers, spill, shared memory and occupancy of every Triton kernel the DSA indexer launches,
over the serving envelope, without a GPU.

For each shape (batch x context) the script builds the call's tensors on the CPU, asks the
solution itself for its launches (``kernel.path_for`` and the path's ``launches``, with the
H200's 132 SMs standing in for the long-row plan's SM count), and AOT-compiles each launch for
sm_90a with Triton's bundled ptxas: the signature comes from the JIT's own specialisation of
the launch's real arguments (pointer dtypes, 16-byte divisibility, ints equal to 1 as
constants), the constexprs and num_warps / num_stages / maxnreg from the launch's meta.
``cuobjdump -res-usage`` gives registers, stack and local memory; ``metadata.shared`` the
shared memory.  Programs per SM are the smallest of three limits:

  registers  65536 / (round_up(regs, 8) * 32 * num_warps)
  shared     228 KB / (shared + 1 KB reserved per block), 0 above 227 KB per block
  warps      64 / num_warps                                   (and at most 32 blocks)

occupancy = programs * num_warps / 64, waves = grid programs / (132 * programs per SM); busy
waves count only the programs with work under the definition's seq_lens (lengths uniform below
the width, one full row: about (B + 1) / 2 full rows).  Kernels held back by registers (the
register limit below the shared-memory and warp limits) are compiled again under ``maxnreg``
caps that would let one, two or three more programs fit.

    python experiments/indexer_aot_resources.py [--batches 1,4,16,32,64] [--contexts 4,8,12,16,32,64,128]
                                                [--do-not-specialize stripes] [--json FILE]
                                                [--package PKG --path DIR [--set MODULE.NAME=VALUE]]

Contexts in K tokens (page size 64: 4K = 64 pages), or in pages with a "p" (``--contexts
20p,45p,91p``: contest widths).  Triton's compile cache makes reruns fast.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from typing import NamedTuple

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource
from triton.runtime.errors import PTXASError
from triton.runtime.jit import native_specialize_impl

from kernelwright.solutions.dsa_indexer_triton import common, kernel, long_rows

TARGET = GPUTarget("cuda", 90, 32)
CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
H200_SMS = 132
REGS_PER_SM = 65536
SMEM_PER_SM = 228 * 1024          # bytes
SMEM_RESERVED = 1024              # bytes per block
SMEM_MAX_BLOCK = 227 * 1024       # bytes
WARPS_PER_SM = 64
BLOCKS_PER_SM = 32
HEADS, HEAD_DIM, PAGE_SIZE, TOPK = 64, 128, 64, 2048
# Constexprs that are the same at every shape of the envelope (left out of the config column).
FIXED = {"TOPK", "TOPK_BLOCK", "H", "D", "PS", "ROW_BYTES", "HIST_BITS", "MAX_STRIPES", "BATCH_BLOCK",
         "STAGES", "SELECT_HERE", "CAND_TILE"}
OPTIONS = ("num_warps", "num_stages", "maxnreg")
MIN_CAP = 64    # lower caps spill hundreds of bytes or are refused (an FP8 wgmma needs ~58)
# Runtime arguments compiled as if the kernel were declared with triton.jit(do_not_specialize=...)
# (--do-not-specialize): never a constant, no divisibility hint.
DO_NOT_SPECIALIZE = set()


class Resources(NamedTuple):
    """One compiled kernel: registers per thread, stack and local bytes per thread, shared
    bytes per block, and the SASS instructions (per warp) of its longest loop's body -- for the
    score kernels the page loop, whose count per page against the SM's issue rate says whether
    the K stream can be issue-bound (4 schedulers x ~520 cycles per 8.4 KB page at 4.27 TB/s
    over 132 SMs: ~2070 warp-instructions per page per SM)."""
    regs: int
    stack: int
    local: int
    shared: int
    loop: int


class Occupancy(NamedTuple):
    """Programs per SM allowed by registers, shared memory and warps, the resulting programs per
    SM and the fraction of the SM's 64 warps they hold."""
    by_regs: int
    by_smem: int
    by_warps: int
    programs: int
    occupancy: float


# ---------------------------------------------------------------------------------- the launches

def call_tensors(batch: int, pages: int) -> dict:
    """The six arguments of one indexer call on the CPU (contents irrelevant: nothing runs)."""
    num_pages = 8   # the K cache's page count reaches no launch decision
    return dict(q_index_fp8=torch.zeros((batch, HEADS, HEAD_DIM), dtype=torch.float8_e4m3fn),
                k_index_cache_fp8=torch.zeros((num_pages, PAGE_SIZE, 1, HEAD_DIM + 4), dtype=torch.int8),
                weights=torch.zeros((batch, HEADS), dtype=torch.float32),
                seq_lens=torch.zeros(batch, dtype=torch.int32),
                block_table=torch.zeros((batch, pages), dtype=torch.int32),
                topk_indices=torch.zeros((batch, TOPK), dtype=torch.int32))


def solution_launches(batch: int, pages: int):
    """(path, [(kernel, grid, args, meta)]): the solution's own launches of a call of this
    shape on an H200, kernel.MAXNREG's caps applied as _launch applies them."""
    t = call_tensors(batch, pages)
    shapes = common.call_shapes(t["q_index_fp8"], t["k_index_cache_fp8"], t["weights"], t["block_table"],
                         t["topk_indices"])
    path = kernel.path_for(shapes.max_pages, shapes.page_size, shapes.topk)
    if path == "all_selected":
        return path, common.all_selected_launches(shapes, t["seq_lens"], t["block_table"], t["topk_indices"])
    saved = long_rows._num_sms
    long_rows._num_sms = lambda device: H200_SMS
    try:
        launches, _ = kernel._PATHS[path](shapes, t["q_index_fp8"], *common.k_cache_views(t["k_index_cache_fp8"]),
                                          t["weights"], t["seq_lens"], t["block_table"], t["topk_indices"])
    finally:
        long_rows._num_sms = saved
    return path, [(fn, grid, args, kernel.with_register_cap(fn, meta)) for fn, grid, args, meta in launches]


# ---------------------------------------------------------------------------------- compiling

def source_for(fn, args, meta):
    """(ASTSource, {argument: value}): the source the JIT would build for this launch -- its
    own specialisation of every runtime argument, the launch's constexprs -- and the runtime
    arguments it turns into constants (ints equal to 1)."""
    consts = {k: v for k, v in meta.items() if k not in OPTIONS}
    names = [n for n in fn.arg_names if n not in consts]
    assert len(names) == len(args), (fn.__name__, names, len(args))
    sig = dict.fromkeys(fn.arg_names, "constexpr")
    attrs, specialised = {}, {}
    for n, a in zip(names, args):
        ty, key = native_specialize_impl(CUDABackend, a, False, n not in DO_NOT_SPECIALIZE, True)
        if ty == "constexpr":
            specialised[n] = key
            continue
        sig[n] = ty
        if isinstance(key, str):
            attrs[(fn.arg_names.index(n),)] = CUDABackend.parse_attr(key)
    return ASTSource(fn, sig, {**consts, **specialised}, attrs=attrs), specialised


_compiled = {}


def compile_resources(fn, src: ASTSource, meta) -> Resources:
    """Resources of the sm_90a build of `src` under the launch options in `meta` (cached by
    kernel, source and options)."""
    options = {k: meta[k] for k in OPTIONS if meta.get(k) is not None}
    key = build_key(fn, src, meta)
    if key not in _compiled:
        with contextlib.redirect_stdout(io.StringIO()):   # Triton prints the PTX of a failed build
            k = triton.compile(src, target=TARGET, options=options)
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"])
            f.flush()
            out = subprocess.run([CUOBJDUMP, "-res-usage", f.name], capture_output=True, text=True,
                                 check=True).stdout
            sass = subprocess.run([CUOBJDUMP, "-sass", f.name], capture_output=True, text=True,
                                  check=True).stdout
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", out)
        _compiled[key] = Resources(int(m.group(1)), int(m.group(2)), int(m.group(4)),
                                   k.metadata.shared + int(m.group(3)), longest_loop(sass))
    return _compiled[key]


SASS_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def longest_loop(sass: str) -> int:
    """Instructions in the body of the longest backward branch of `sass` (0: no loop)."""
    ops = [(int(m.group(1), 16), m.group(2), m.group(3)) for m in SASS_INSTRUCTION.finditer(sass)]
    best = 0
    for addr, op, rest in ops:
        target = re.search(r"0x([0-9a-f]+)", rest) if op.startswith("BRA") else None
        if target and int(target.group(1), 16) < addr:
            best = max(best, sum(1 for a, _, _ in ops if int(target.group(1), 16) <= a <= addr))
    return best


def build_key(fn, src: ASTSource, meta) -> str:
    """One string per distinct build: kernel, source hash (signature, constants) and options."""
    return f"{fn.__name__}:{src.hash()}:" + ",".join(f"{k}={meta.get(k)}" for k in OPTIONS)


# ---------------------------------------------------------------------------------- occupancy

def occupancy(res: Resources, num_warps: int) -> Occupancy:
    """Programs per SM of a kernel with these resources (H200, sm_90)."""
    by_regs = REGS_PER_SM // (-(-res.regs // 8) * 8 * 32 * num_warps)
    by_smem = 0 if res.shared > SMEM_MAX_BLOCK else SMEM_PER_SM // (res.shared + SMEM_RESERVED)
    by_warps = WARPS_PER_SM // num_warps
    programs = min(by_regs, by_smem, by_warps, BLOCKS_PER_SM)
    return Occupancy(by_regs, by_smem, by_warps, programs, programs * num_warps / WARPS_PER_SM)


def caps_to_try(occ: Occupancy, num_warps: int, most: int = 3) -> list:
    """maxnreg values (multiples of 8, at least MIN_CAP) that would fit one, two, ... `most`
    more programs per SM by registers, up to the shared-memory and warp limits; empty when
    registers do not bind."""
    ceiling = min(occ.by_smem, occ.by_warps, BLOCKS_PER_SM)
    caps = []
    for programs in range(occ.by_regs + 1, min(ceiling, occ.by_regs + most) + 1):
        cap = min(255, REGS_PER_SM // (programs * 32 * num_warps)) // 8 * 8
        if cap >= MIN_CAP and cap not in caps:
            caps.append(cap)
    return caps


def busy_programs(grid, batch: int) -> int:
    """Programs of a launch that do work under the definition's seq_lens (uniform below the
    width, one full row: about (B + 1) // 2 full rows of pages): all of a per-row grid (B,),
    that share of a grid over rows' pages or tiles (the others return at once)."""
    programs = math.prod(grid)
    if tuple(grid) == (batch,):
        return programs
    return -(-programs * ((batch + 1) // 2) // batch)


def config_label(meta, specialised) -> str:
    """The launch's varying constexprs, the runtime ints the JIT makes constants (value 1),
    and its compile options."""
    parts = [f"{k}={v}" for k, v in meta.items() if k not in FIXED and k not in OPTIONS]
    parts += [f"{k}={v}" for k, v in specialised.items()]
    parts.append(f"w{meta.get('num_warps', 4)}s{meta.get('num_stages', 3)}")
    if meta.get("maxnreg"):
        parts.append(f"cap{meta['maxnreg']}")
    return " ".join(parts)


def context_pages(context: str) -> int:
    """Block-table width of a context given in K tokens ("16") or in pages ("45p")."""
    return int(context[:-1]) if context.endswith("p") else int(context) * 1024 // PAGE_SIZE


def row(batch, context, path, fn, grid, args, meta, cap=None) -> dict:
    """One table row: a launch (under register cap `cap` if given) at one shape."""
    meta = dict(meta, maxnreg=cap) if cap else meta
    warps = meta.get("num_warps", 4)
    src, specialised = source_for(fn, args, meta)
    label = context if context.endswith("p") else f"{context}K"
    head = dict(shape=f"{batch}x{label}", path=path, kernel=fn.__name__,
                config=config_label(meta, specialised), warps=warps, build=build_key(fn, src, meta))
    try:
        res = compile_resources(fn, src, meta)
    except PTXASError as exc:   # a cap below what one instruction needs
        need = re.search(r"register target of (\d+)", str(exc))
        return dict(head, error=f"ptxas refuses the cap (needs >= {need.group(1) if need else '?'})")
    occ = occupancy(res, warps)
    per_wave = H200_SMS * occ.programs
    grid_n, busy = math.prod(grid), busy_programs(grid, batch)
    return dict(head, **res._asdict(), **occ._asdict(), grid=grid_n, busy=busy,
                waves=grid_n / per_wave if per_wave else math.inf,
                busy_waves=busy / per_wave if per_wave else math.inf)


def merge_builds(rows) -> list:
    """Rows of one build at several shapes as one row: the shapes listed, busy waves as their
    range."""
    merged = {}
    for r in rows:
        m = merged.setdefault(r["build"], dict(r, shapes=[], lo=math.inf, hi=0.0))
        m["shapes"].append(r["shape"])
        if "error" not in r:
            m["lo"], m["hi"] = min(m["lo"], r["busy_waves"]), max(m["hi"], r["busy_waves"])
    for m in merged.values():
        m["shape"] = " ".join(m["shapes"])
        m["wave_range"] = f"{m['lo']:.2f}-{m['hi']:.2f}" if m["hi"] else ""
    return list(merged.values())


# ---------------------------------------------------------------------------------- the report

# (row key, header, width, format spec); a negative width aligns left
RESOURCE_COLUMNS = (("kernel", "kernel", -22, ""), ("config", "config", -60, ""), ("regs", "regs", 4, "d"),
                    ("stack", "stack", 5, "d"), ("local", "local", 5, "d"), ("shared", "shared", 6, "d"),
                    ("by_regs", "/reg", 4, "d"), ("by_smem", "/smm", 4, "d"), ("by_warps", "/wrp", 4, "d"),
                    ("programs", "p/SM", 4, "d"), ("occupancy", "occ", 6, ".1%"),
                    ("loop", "loop", 5, "d"))
SHIPPED_COLUMNS = ((("shape", "shape", 8, ""),) + RESOURCE_COLUMNS
                   + (("grid", "grid", 5, "d"), ("waves", "waves", 5, ".2f"), ("busy", "busy", 5, "d"),
                      ("busy_waves", "bwave", 5, ".2f")))
CAPPED_COLUMNS = RESOURCE_COLUMNS + (("wave_range", "bwaves", -10, ""), ("shape", "shapes", -1, ""))


def _cell(value, width, spec=""):
    text = format(value, spec)
    return text.ljust(-width) if width < 0 else text.rjust(width)


def print_table(title, rows, columns):
    print(f"\n{title}")
    print(" ".join(_cell(head, width) for _, head, width, _ in columns))
    for r in rows:
        if "error" in r:
            print(" ".join(_cell(r[key], width) for key, _, width, _ in columns[:3]), r["error"],
                  r["shape"] if columns is CAPPED_COLUMNS else "")
            continue
        print(" ".join(_cell(r[key], width, spec) for key, _, width, spec in columns))


def use_package(package: str, settings) -> None:
    """Point the script at another copy of the solution (an importable package, e.g.
    a candidate made from experiments/candidates' patches under .carry) and apply `settings` ("module.NAME=VALUE")."""
    global common, kernel, long_rows
    common, kernel, long_rows = (importlib.import_module(f"{package}.{m}")
                                 for m in ("common", "kernel", "long_rows"))
    for setting in settings:
        target, value = setting.split("=", 1)
        module, name = target.rsplit(".", 1)
        setattr(importlib.import_module(f"{package}.{module}"), name, ast.literal_eval(value))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="1,4,16,32,64")
    ap.add_argument("--contexts", default="4,8,12,16,32,64,128", help="K tokens, or pages with a 'p'")
    ap.add_argument("--json", default=None, help="also write every row to this file")
    ap.add_argument("--do-not-specialize", default="", metavar="ARGS",
                    help="comma-separated runtime arguments (e.g. stripes) compiled as Triton's "
                         "do_not_specialize would: never constants")
    ap.add_argument("--package", default=None, help="another copy of the solution, importable by this name")
    ap.add_argument("--path", action="append", default=[], help="a folder to import --package from")
    ap.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                    help="a module setting of the solution (or of --package's copy), e.g. long_rows._MAX_PAGES_PER_ITEM=64")
    args = ap.parse_args(argv)
    if args.package or args.set:
        sys.path[:0] = args.path
        use_package(args.package or "kernelwright.solutions.dsa_indexer_triton", args.set)
    DO_NOT_SPECIALIZE.update(n for n in args.do_not_specialize.split(",") if n)
    print("triton", triton.__version__, "sm_90a, bundled ptxas; H200: 132 SMs, 64K registers and 228 KB "
          "shared memory per SM")
    rows, capped = [], []
    for context in args.contexts.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            path, launches = solution_launches(batch, context_pages(context))
            for fn, grid, call_args, meta in launches:
                r = row(batch, context, path, fn, grid, call_args, meta)
                rows.append(r)
                if "error" not in r:
                    occ = Occupancy(*(r[k] for k in Occupancy._fields))
                    capped += [row(batch, context, path, fn, grid, call_args, meta, cap)
                               for cap in caps_to_try(occ, r["warps"])]
    print_table("The solution's launches (p/SM: programs per SM, the smallest of the register, "
                "shared-memory and warp limits; waves: grid / (132 x p/SM); busy: programs with work "
                "under the definition's seq_lens)", rows, SHIPPED_COLUMNS)
    print_table("Register-limited builds under maxnreg caps (bwaves: busy waves over the shapes listed)",
                merge_builds(capped), CAPPED_COLUMNS)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"launches": rows, "capped": capped}, f, indent=1)


if __name__ == "__main__":
    main()
