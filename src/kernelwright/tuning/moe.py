"""Tuning harness of the fused-MoE solution (``solutions/moe_fp8_triton``): candidate rows of
its block-size table, measured on one CUDA device with the gate's rules, compiled for sm_90a on
the CPU, written back into ``configs.py``, or packed into a copy of the solution for a gate A/B.

Command line (``python -m kernelwright.tuning.moe COMMAND``):

    sweep --out DIR [--ts 1,7,901] [--only d2,t12] [--every-t] [--budget S] [--previous DIR]
          [--apply PATH/configs.py] [--smoke]
        GPU: every selected variant at the T points of its regime (``--every-t``: at every
        ``--ts`` point), then the fastest correct variant per row of ``RANGES``; with ``--apply``
        (and every row chosen and validated) that table replaces ``CONFIGS`` in PATH.
        ``--previous DIR`` also times a previous copy of the solution (its kernel.py, routing.py,
        gemm.py) eagerly, as it shipped.  ``--smoke``: the plumbing on the CPU (interpreter).
        Writes DIR/moe_variants.json (rows, chosen, table, validate) and prints a table.
    aot DIR [--only NAMES | --table]
        CPU: sm_90a compile of the variants' kernels (``--table``: of the shipped table's rows)
        with Triton's bundled ptxas; registers, spills, shared memory, MMA kind -> DIR/aot.json.
    ab-folder OUT --name NAME --set MAX_T:KEY=VALUE,... [--set ...]
        A copy of the shipped solution under a new name whose configs.py has the given rows
        changed, for ``kernelwright bench -d moe -s OUT`` beside the shipped one (same run, same
        routing draws, candidates interleaved per workload).
    once [--seq-len 7] [--calls 3]
        GPU: a few eager calls of the shipped solution at one contest T, for a profiler to attach
        to (``ncu -k regex:_gemm1 -c 1 python -m kernelwright.tuning.moe once --seq-len 7``).

In Python: ``VARIANTS`` (name -> (regime, config)), ``aot(out_dir, variants=None)``,
``read_table(path)`` / ``write_table(path, table)``, ``ab_folder(out, name, sets)``,
``config_keys()``.

Timing (``sweep``): every variant runs through ``kernel.run`` (its CUDA-graph cache included)
  ev   the gate's eager clock: device idle before the start event, one call, end event, L2
       flushed before every iteration, two rotating buffer sets whose routing logits, bias,
       activations and activation scales get new contents from a pool of 4 draws every
       iteration; median of N after warm-up (host launch included);
  dev  device time of the same calls: the GPU kept busy while the host launches;
and is checked with the gate's contest rule (an element fails where |x-y| > 1 and rel > 0.3;
matched ratio >= 0.9; no non-finite) against the definition's reference on two (set, draw)
pairs, through the graph path on both sets and the eager path on set 0.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import math
import os
import re
import runpy
import shutil
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
import triton

from kernelwright.tuning.timer import Timer

SHIPPED = Path(__file__).resolve().parents[1] / "solutions" / "moe_fp8_triton"

TS = [1, 7, 16, 32, 57, 80, 901, 11948, 14107]
WARM, N = 4, 20

_D = dict(ROUTE_BT=1, ROUTE_WARPS=1, BLOCK_M=16, QG=64, G1_BLOCK_K=128, G1_WARPS=4, G1_STAGES=4,
          G1_GROUP=1, G2_BLOCK_N=64, G2_BLOCK_K=64, G2_WARPS=4, G2_STAGES=4, G2_GROUP=1,
          COMBINE=False, RED_BT=1, RED_BH=1024, RED_WARPS=4)
_M = dict(_D, BLOCK_M=32, QG=128, G1_WARPS=8, G1_STAGES=3, G2_BLOCK_N=128, G2_BLOCK_K=128,
          G2_WARPS=8, G2_STAGES=4)
_P = dict(_M, ROUTE_BT=4, BLOCK_M=64)

VARIANTS_T2 = dict(_P, TMA=True, G1_GROUP=8, G2_GROUP=8, G1_STAGES=4, G2_STAGES=4)
VARIANTS_T12 = dict(_P, TMA=True, BLOCK_M=128, G1_WARPS=16, G1_GROUP=8, G2_GROUP=8, G2_STAGES=4)
# the shipped prefill row with Triton GEMMs (t12p1sm3); the warp-specialised variants start from it
VARIANTS_T12_SHIPPED = dict(VARIANTS_T12, PERSIST=1, A_SCALE_SORTED=True, G2_SPLIT_M=2, G2_WARPS=4,
                            G2_STAGES=3, G2_PERSIST=3)
# name -> (regime, config); regime: the T points it is measured at (REGIME_TS).  Variants measured
# and dropped, with their numbers, are in docs/history/moe.md.
VARIANTS = {
    # decode, BLOCK_M 16 (mma.sync), T <= 256
    "d0": ("decode", dict(_D)),
    "d1": ("decode", dict(_D, G2_BLOCK_K=128)),
    "d2": ("decode", dict(_D, G1_BLOCK_K=256, G2_BLOCK_K=128)),
    "d3": ("decode", dict(_D, QG=32, G1_STAGES=6, G2_BLOCK_K=128)),
    "d4": ("decode", dict(_D, QG=32, G1_BLOCK_K=256, G2_BLOCK_N=32, G2_BLOCK_K=128)),
    "d5": ("decode", dict(_D, G1_STAGES=6, G2_BLOCK_N=128, G2_BLOCK_K=128)),
    "d6": ("decode", dict(_D, G2_BLOCK_K=128, COMBINE=True)),
    "d7": ("decode", dict(_D, G2_BLOCK_K=256, G2_STAGES=3)),
    "d8": ("decode", dict(_D, QG=32, G1_STAGES=8, G2_BLOCK_N=32, G2_BLOCK_K=128, G2_STAGES=6)),
    # split-K GEMM1 (one or two active experts cannot fill 132 SMs): fp32 partials + epilogue kernel
    "d9": ("decode", dict(_D, QG=32, G1_SPLIT_K=4, G1_STAGES=4, G2_BLOCK_N=32, G2_BLOCK_K=128, G2_STAGES=6)),
    "d10": ("decode", dict(_D, G1_BLOCK_K=256, G1_SPLIT_K=2, G2_BLOCK_K=128)),
    "d11": ("decode", dict(_D, QG=32, G1_SPLIT_K=7, G1_STAGES=4, G2_BLOCK_N=32, G2_BLOCK_K=128, G2_STAGES=6)),
    # the decode tiles in the mid range, with grouped M order: the 2-4 M-blocks of one expert
    # share each weight tile through L2
    "d12": ("decode", dict(_D, G1_BLOCK_K=256, G2_BLOCK_K=128, G1_GROUP=4, G2_GROUP=4)),
    "d13": ("decode", dict(_D, BLOCK_M=32, G1_BLOCK_K=256, G2_BLOCK_K=128, G1_GROUP=4, G2_GROUP=4)),
    "d14": ("decode", dict(_D, G1_BLOCK_K=256, G2_BLOCK_K=128, G1_GROUP=8, G2_GROUP=8)),
    # mid (T = 901), pointer loads
    "m0": ("mid", dict(_M)),
    "m1": ("mid", dict(_M, G1_GROUP=8, G2_GROUP=8)),
    "m2": ("mid", dict(_M, BLOCK_M=64, G1_GROUP=8, G2_GROUP=8)),
    "m3": ("mid", dict(_D, BLOCK_M=32, G1_GROUP=8, G2_BLOCK_K=128, G2_GROUP=8)),
    "m4": ("mid", dict(_D, G1_GROUP=8, G2_BLOCK_K=128, G2_GROUP=8)),
    # (4 warps at BLOCK_M 64 spill 96 bytes in the sm_90a compile: left out)
    "m6": ("mid", dict(_M, BLOCK_M=64, G1_GROUP=8, G2_GROUP=8, G1_STAGES=4)),
    "m7": ("mid", dict(_M, BLOCK_M=64, QG=64, G1_GROUP=8, G2_GROUP=8)),      # 2x the N tiles of m2
    # prefill (T > 4096), BLOCK_M >= 64 (wgmma), pointer loads
    "p0": ("prefill", dict(_P)),
    "p1": ("prefill", dict(_P, G1_GROUP=8, G2_GROUP=8)),
    "p2": ("prefill", dict(_P, BLOCK_M=128, QG=64, G1_GROUP=8, G2_GROUP=8, G2_STAGES=3)),
    "p3": ("prefill", dict(_P, G1_GROUP=8, G2_GROUP=8, G2_BLOCK_N=256, G2_STAGES=3)),
    "p4": ("prefill", dict(_P, G1_GROUP=8, G2_GROUP=8, RED_BT=4)),
    "p5": ("prefill", dict(_P, G1_GROUP=8, G1_STAGES=4, G2_GROUP=8)),
    # (BLOCK_M 128 with QG 128 spills 140 bytes in the sm_90a compile: left out)
    "p7": ("prefill", dict(_P, G1_BLOCK_K=256, G1_STAGES=2, G1_GROUP=8, G2_GROUP=8)),
    # TMA tile loads (gemm_tma.py) after a gather of A into expert-sorted rows
    "t1": ("prefill", dict(_P, TMA=True, G1_GROUP=8, G2_GROUP=8)),
    "t2": ("prefill", dict(VARIANTS_T2)),
    "t3": ("mid", dict(_M, TMA=True, BLOCK_M=64, G1_GROUP=8, G2_GROUP=8)),
    # larger M tiles on the TMA path (each weight tile feeds 128 rows: half the L2->SMEM bytes per
    # FLOP of BLOCK_M 64)
    "t4": ("prefill", dict(_P, TMA=True, BLOCK_M=128, QG=64, G1_GROUP=8, G2_GROUP=8, G2_STAGES=3)),
    "t5": ("prefill", dict(_P, TMA=True, BLOCK_M=128, G1_GROUP=8, G2_GROUP=8, G1_STAGES=3, G2_STAGES=3)),
    "t6": ("prefill", dict(_P, TMA=True, BLOCK_M=128, G1_GROUP=8, G2_GROUP=8, G1_STAGES=2, G2_STAGES=3)),
    "t7": ("prefill", dict(_P, TMA=True, BLOCK_M=128, QG=64, G1_GROUP=8, G2_GROUP=8, G1_STAGES=4, G2_BLOCK_N=256, G2_STAGES=3)),
    # BLOCK_M 128 x QG 128 on 16 warps (4 warpgroups: 64 x 64 of each accumulator apiece)
    "t8": ("prefill", dict(_P, TMA=True, BLOCK_M=128, G1_WARPS=16, G1_GROUP=8, G2_GROUP=8, G2_STAGES=3)),
    "t9": ("prefill", dict(_P, TMA=True, BLOCK_M=128, G1_WARPS=16, G1_STAGES=4, G1_GROUP=8, G2_WARPS=16, G2_BLOCK_N=256, G2_GROUP=8, G2_STAGES=3)),
    "t10": ("prefill", dict(_P, TMA=True, BLOCK_M=128, G1_WARPS=16, G1_STAGES=4, G1_GROUP=8, G2_GROUP=8, G2_STAGES=3)),
    "t11": ("prefill", dict(_P, TMA=True, BLOCK_M=128, G1_WARPS=16, G1_GROUP=8, G2_WARPS=16, G2_GROUP=8, G2_STAGES=3)),
    "t12": ("prefill", dict(VARIANTS_T12)),
    "t13": ("prefill", dict(_P, TMA=True, BLOCK_M=128, G1_WARPS=16, G1_GROUP=4, G2_GROUP=4, G2_STAGES=3)),
    "t14": ("prefill", dict(_P, TMA=True, BLOCK_M=128, G1_WARPS=16, G1_GROUP=16, G2_GROUP=16, G2_STAGES=3)),
    # persistent tile loops (PERSIST programs per SM stride over the used tiles only; the bounded
    # grids launch up to 7x more programs than there are used tiles at prefill)
    "t2p1": ("mid", dict(VARIANTS_T2, PERSIST=1)),
    "t2p2": ("mid", dict(VARIANTS_T2, PERSIST=2)),
    "t12p1": ("prefill", dict(VARIANTS_T12, PERSIST=1)),
    "t12p2": ("prefill", dict(VARIANTS_T12, PERSIST=2)),
    # GEMM1 reads its activation scales in row order (the gather writes them)
    "t12p1s": ("prefill", dict(VARIANTS_T12, PERSIST=1, A_SCALE_SORTED=True)),
    "t2s": ("mid", dict(VARIANTS_T2, A_SCALE_SORTED=True)),
    # GEMM2 on 64-row tiles with one warpgroup: two (three) programs per SM interleave
    "t12p1sm": ("prefill", dict(VARIANTS_T12, PERSIST=1, A_SCALE_SORTED=True, G2_SPLIT_M=2, G2_WARPS=4,
                                G2_PERSIST=2)),
    "t12p1sm3": ("prefill", dict(VARIANTS_T12, PERSIST=1, A_SCALE_SORTED=True, G2_SPLIT_M=2, G2_WARPS=4,
                                 G2_STAGES=3, G2_PERSIST=3)),
    "t12p1sm0": ("prefill", dict(VARIANTS_T12, PERSIST=1, A_SCALE_SORTED=True, G2_SPLIT_M=2, G2_WARPS=4,
                                 G2_PERSIST=0)),
    "t2s4": ("mid", dict(VARIANTS_T2, A_SCALE_SORTED=True, G2_WARPS=4)),
    # decode: GEMM1 with 3 programs per SM (2 stages of BLOCK_K 256), and the TMA path at BLOCK_M 16
    "d2s3": ("decode", dict(_D, G1_BLOCK_K=256, G2_BLOCK_K=128, G1_STAGES=3)),
    "td1": ("decode", dict(_D, TMA=True, A_SCALE_SORTED=True, G1_STAGES=6, G2_BLOCK_N=64, G2_STAGES=6)),
    "td2": ("decode", dict(_D, TMA=True, A_SCALE_SORTED=True, QG=32, G1_STAGES=8, G2_BLOCK_N=32, G2_STAGES=8)),
    "td3": ("decode", dict(_D, TMA=True, A_SCALE_SORTED=True, G1_STAGES=4, G2_BLOCK_N=64, G2_STAGES=4)),
    # decode: more bytes in flight per GEMM1 program (d2 keeps 2 x 36 KB stages in flight)
    "d2k512": ("decode", dict(_D, G1_BLOCK_K=512, G1_STAGES=3, G2_BLOCK_K=128)),
    "d8k256": ("decode", dict(_D, QG=32, G1_BLOCK_K=256, G1_STAGES=6, G2_BLOCK_N=32, G2_BLOCK_K=128, G2_STAGES=6)),
    # decode: one wider GEMM1 tile per SM (QG 128: 16 N-tiles per expert instead of 32)
    "d2q128": ("decode", dict(_D, QG=128, G1_BLOCK_K=128, G1_STAGES=4, G2_BLOCK_K=128)),
    "d2q128k256": ("decode", dict(_D, QG=128, G1_BLOCK_K=256, G1_STAGES=3, G2_BLOCK_K=128)),
    # split-K GEMM1 on d2's tile, spreading the used tiles' K blocks over more programs (d10: 2-way)
    "d2sk4": ("decode", dict(_D, G1_BLOCK_K=256, G2_BLOCK_K=128, G1_SPLIT_K=4)),
    "d2sk7": ("decode", dict(_D, G1_BLOCK_K=256, G2_BLOCK_K=128, G1_SPLIT_K=7)),
    # prefill: GEMM2 stages and the reduce's tile
    "t12p1g3": ("prefill", dict(VARIANTS_T12, PERSIST=1, G2_STAGES=3)),
    "t12p1g5": ("prefill", dict(VARIANTS_T12, PERSIST=1, G2_STAGES=5)),
    "t12p1r1": ("prefill", dict(VARIANTS_T12, PERSIST=1, RED_BT=4)),
    "t12p1r2": ("prefill", dict(VARIANTS_T12, PERSIST=1, RED_BT=2, RED_BH=2048, RED_WARPS=8)),
    "t12p1r3": ("prefill", dict(VARIANTS_T12, PERSIST=1, RED_BT=4, RED_BH=512, RED_WARPS=4)),
    # decode with persistent GEMMs (GEMM1 d2: 111 KB of shared memory, 2 programs per SM; d8:
    # 72 KB, 3; GEMM2: 31 KB, up to 7)
    "d2p2": ("decode", dict(_D, G1_BLOCK_K=256, G2_BLOCK_K=128, PERSIST=2)),
    "d2p2g6": ("decode", dict(_D, G1_BLOCK_K=256, G2_BLOCK_K=128, PERSIST=2, G2_PERSIST=6)),
    "d8p3": ("decode", dict(_D, QG=32, G1_STAGES=8, G2_BLOCK_N=32, G2_BLOCK_K=128, G2_STAGES=6, PERSIST=3)),
    "d8p3g6": ("decode", dict(_D, QG=32, G1_STAGES=8, G2_BLOCK_N=32, G2_BLOCK_K=128, G2_STAGES=6, PERSIST=3,
                              G2_PERSIST=6)),
    # GEMM1 warp-specialised in Gluon (G1_WS, gemm_ws.py) on the shipped prefill row
    "t12ws": ("prefill", dict(VARIANTS_T12_SHIPPED, G1_WS=True, G1_WS_STAGES=4)),
    "t12ws3": ("prefill", dict(VARIANTS_T12_SHIPPED, G1_WS=True, G1_WS_STAGES=3)),
    "t12ws16": ("prefill", dict(VARIANTS_T12_SHIPPED, G1_WS=True, G1_WS_STAGES=4, G1_GROUP=16)),
    # GEMM2 warp-specialised too (G2_WS: 128 x 128 tiles, two product sets per consumer warpgroup,
    # G2_WS_GROUP K blocks per unrolled group, G2_WS_STAGES stages)
    "t12ws2": ("prefill", dict(VARIANTS_T12, PERSIST=1, A_SCALE_SORTED=True, G1_WS=True, G2_WS=True,
                               G2_WS_STAGES=5, G2_WS_GROUP=4)),
    "t12ws2s4": ("prefill", dict(VARIANTS_T12, PERSIST=1, A_SCALE_SORTED=True, G1_WS=True, G2_WS=True,
                                 G2_WS_STAGES=4, G2_WS_GROUP=4)),
    "t12ws2k2": ("prefill", dict(VARIANTS_T12, PERSIST=1, A_SCALE_SORTED=True, G1_WS=True, G2_WS=True,
                                 G2_WS_STAGES=6, G2_WS_GROUP=2)),
}
REGIME_TS = {"decode": [1, 7, 16, 32, 57, 80], "mid": [901], "prefill": [11948, 14107]}
# rows of the table a sweep chooses: (max T, regime, T points that pick its config)
RANGES = [(1, "decode", [1]), (16, "decode", [7, 16]), (48, "decode", [32]),
          (256, "decode", [57, 80]), (2048, "mid", [901]), (None, "prefill", [11948, 14107])]
# (T, local expert offset) points between the measured ones where a chosen table is validated
VALIDATE = [(3, 0), (11, 224), (40, 160), (70, 32), (300, 64), (2000, 192), (6000, 96)]
SMALL = ("routing_logits", "routing_bias", "hidden_states", "hidden_states_scale")


# ------------------------------------------------------------------------------- the table
def literal(table) -> str:
    """``CONFIGS = (...)`` source for ``table`` ((max T, config) rows), lines under 100 chars."""
    lines = ["CONFIGS = ("]
    for max_t, cfg in table:
        head = f"    ({max_t!r}, dict("
        line, pad = head, " " * len(head)
        for i, k in enumerate(cfg):
            item = f"{k}={cfg[k]!r}" + (", " if i < len(cfg) - 1 else ")),")
            if len(line) + len(item.rstrip()) > 99:
                lines.append(line.rstrip())
                line = pad
            line += item
        lines.append(line)
    lines.append(")")
    return "\n".join(lines)


def read_table(path=SHIPPED / "configs.py") -> tuple:
    """The ``CONFIGS`` table of the configs.py at ``path`` (a data-only module: run, not
    imported, so no Triton is loaded)."""
    return runpy.run_path(str(path))["CONFIGS"]


def write_table(path, table) -> None:
    """Replace the ``CONFIGS = (...)`` assignment of the configs.py at ``path`` by ``table``; the
    docstring and everything else in the file stay."""
    text = Path(path).read_text()
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.Assign)
                and [getattr(t, "id", None) for t in n.targets] == ["CONFIGS"])
    lines = text.splitlines(keepends=True)
    Path(path).write_text("".join(lines[:node.lineno - 1]) + literal(table) + "\n"
                          + "".join(lines[node.end_lineno:]))


def config_keys() -> set:
    """Every config key the shipped kernel.py reads (``cfg["KEY"]`` or ``cfg.get("KEY"``): run()
    ignores unknown keys, so a misspelt key would otherwise measure the shipped config twice."""
    text = (SHIPPED / "kernel.py").read_text()
    return set(re.findall(r'cfg(?:\.get\(|\[)"([A-Z0-9_]+)"', text)) | set(    # + _persistent_grid's key
        re.findall(r'_persistent_grid\([^)]*"([A-Z0-9_]+)"\)', text))


def parse_set(text: str) -> Tuple[Optional[int], dict]:
    """'256:G1_BLOCK_K=512,G1_STAGES=3' -> (256, {'G1_BLOCK_K': 512, 'G1_STAGES': 3}).
    Raises ValueError."""
    head, _, body = text.partition(":")
    if not body:
        raise ValueError(f"--set {text!r}: expected MAX_T:KEY=VALUE,...")
    max_t = None if head.strip() == "None" else int(head)
    changes = {}
    for item in body.split(","):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--set {text!r}: {item!r} is not KEY=VALUE")
        try:
            changes[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"--set {text!r}: {value.strip()!r} is not a Python literal") from None
    return max_t, changes


def ab_folder(out: Path, name: str, sets: List[Tuple[Optional[int], dict]], description: str = "") -> tuple:
    """Write a copy of the shipped solution to ``out`` (replaced if it exists) named ``name``,
    whose configs.py has the rows of ``sets`` ((max T, changes)) updated; returns its table.
    Raises ValueError for an unknown key or a max T that no row has."""
    unknown_keys = sorted({k for _, changes in sets for k in changes} - config_keys())
    if unknown_keys:
        raise ValueError(f"unknown config key(s) {unknown_keys}; kernel.py reads {sorted(config_keys())}")
    shipped = read_table()
    known = [max_t for max_t, _ in shipped]
    missing = [t for t, _ in sets if t not in known]
    if missing:
        raise ValueError(f"no table entry with max T {missing}; entries: {sorted(known, key=str)}")
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(SHIPPED, out, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["name"] = name
    manifest["description"] = f"A/B copy of {SHIPPED.name} (kernelwright.tuning.moe ab-folder): {description}"
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    table = tuple((max_t, dict(cfg, **{k: v for mt, s in sets if mt == max_t for k, v in s.items()}))
                  for max_t, cfg in shipped)
    write_table(out / "configs.py", table)
    return table


# ------------------------------------------------------------------------------- AOT (CPU)
def aot(out_dir: str, variants: Optional[Dict[str, Tuple[str, dict]]] = None) -> List[dict]:
    """Compile the GEMM kernels of every variant (default: ``VARIANTS``; the other kernels once
    per distinct constexpr set) for sm_90a with Triton's bundled ptxas, no GPU needed.  Prints and
    returns one dict per kernel (tag, shared memory, registers, spilled bytes, MMA kind, barriers,
    wgmma waits, compile seconds) and writes them to ``out_dir/aot.json``."""
    import subprocess

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernelwright.solutions.moe_fp8_triton import gemm, gemm_tma, routing

    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    H, I = 7168, 2048
    os.makedirs(out_dir, exist_ok=True)
    results, seen = [], set()

    def comp(fn, sig, const, warps, stages, tag, source=ASTSource, **options):
        if tag in seen:
            return
        seen.add(tag)
        sig = dict(sig, **{k: "constexpr" for k in const})
        attrs = {(i,): [["tt.divisibility", 16]] for i, v in enumerate(sig.values()) if v.startswith("*")}
        t0 = time.time()
        k = triton.compile(source(fn=fn, signature=sig, constexprs=const, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": warps, "num_stages": stages, **options})
        ptx = k.asm["ptx"]
        path = os.path.join(out_dir, re.sub(r"[^A-Za-z0-9_.-]", "_", tag) + ".ptx")
        with open(path, "w") as fh:
            fh.write(ptx)
        r = subprocess.run([ptxas, "-arch=sm_90a", "-v", path, "-o", os.devnull],
                           capture_output=True, text=True, check=True)
        spill = [ln for ln in r.stderr.splitlines() if "spill stores" in ln]
        regs = [ln.split("Used")[1].split("registers")[0] for ln in r.stderr.splitlines() if "Used" in ln]
        res = dict(tag=tag, smem=k.metadata.shared, regs=int(regs[0]),
                   spill=int(spill[0].split(",")[1].split()[0]),
                   mma="wgmma" if "wgmma" in ptx else ("mma.sync" if "mma.sync" in ptx else "none"),
                   bar=ptx.count("bar.sync"),
                   waits="".join(re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+)", ptx)),
                   s=round(time.time() - t0, 1))
        results.append(res)
        print(json.dumps(res), flush=True)

    for name, (_, cfg) in (VARIANTS if variants is None else variants).items():
        bm, qg = cfg["BLOCK_M"], cfg["QG"]
        split = int(cfg.get("G1_SPLIT_K", 1))
        if cfg.get("TMA"):
            bn2 = cfg["G2_BLOCK_N"]
            per = bool(cfg.get("PERSIST"))
            loc = dict(NUM_LOCAL=32, NUM_LOCAL_P2=32, PERSIST=per)
            srt = bool(cfg.get("A_SCALE_SORTED"))
            sub = int(cfg.get("G2_SPLIT_M", 1))
            comp(gemm_tma._gather_rows_kernel,
                 dict(a_ptr="*fp8e4nv", a_scale_ptr="*fp32", sorted_ptr="*i32", block_expert_ptr="*i32",
                      block_rows_ptr="*i32", counts_ptr="*i32", out_ptr="*fp8e4nv", out_scale_ptr="*fp32",
                      T="i32", R="i32"),
                 dict(H=H, TOP_K=8, BLOCK_M=bm, BLOCK_H=512, **loc, SCALE_OUT=srt), 4, 1,
                 f"gather_bm{bm}_p{int(per)}_s{int(srt)}")
            if cfg.get("G1_WS") or cfg.get("G2_WS"):
                from triton.experimental.gluon import language as gl
                from triton.experimental.gluon._runtime import GluonASTSource

                from kernelwright.solutions.moe_fp8_triton import gemm_ws
                # both Gluon GEMMs load every operand as [128, 128] fp8 boxes in the default NVMMA layout
                box = f"tensordesc<fp8e4nv[128,128],{gl.NVMMASharedLayout.get_default_for([128, 128], gl.float8e4nv)!r}>"
            if cfg.get("G1_WS"):
                ws1 = int(cfg.get("G1_WS_STAGES", 4))
                comp(gemm_ws._gemm1_ws_kernel,
                     dict(a_desc=box, a_scale_ptr="*fp32", w_desc=box, w_scale_ptr="*fp32", block_expert_ptr="*i32",
                          block_rows_ptr="*i32", counts_ptr="*i32", c_ptr="*fp8e4nv", c_scale_ptr="*fp32", R="i32"),
                     dict(H=H, I=I, NUM_STAGES=ws1, GROUP_M=cfg["G1_GROUP"], NUM_LOCAL=32, NUM_LOCAL_P2=32,
                          FP8_MAX_C=448.0, WORKER_REGS=gemm_ws.PRODUCER_REGS, num_warps=8), 8, ws1,
                     f"g1_ws_s{ws1}_g{cfg['G1_GROUP']}", source=GluonASTSource, maxnreg=gemm_ws.MAXNREG)
            if cfg.get("G2_WS"):
                grp, ws2 = int(cfg.get("G2_WS_GROUP", 4)), int(cfg.get("G2_WS_STAGES", 5))
                comp(gemm_ws._gemm2_ws_kernel,
                     dict(c_desc=box, c_scale_ptr="*fp32", w_desc=box, w_scale_ptr="*fp32", block_expert_ptr="*i32",
                          block_rows_ptr="*i32", counts_ptr="*i32", y_ptr="*bf16", R="i32"),
                     dict(H=H, I=I, NUM_STAGES=ws2, GROUP_M=cfg["G2_GROUP"], NUM_LOCAL=32, NUM_LOCAL_P2=32,
                          GROUP=grp, WORKER_REGS=gemm_ws.PRODUCER_REGS, num_warps=8), 8, ws2,
                     f"g2_ws_s{ws2}_g{cfg['G2_GROUP']}_k{grp}", source=GluonASTSource,
                     maxnreg=gemm_ws.MAXNREG)
            comp(gemm_tma._gemm1_tma_kernel,
                 dict(a_desc=f"tensordesc<fp8e4nv[{bm},128]>", a_scale_ptr="*fp32",
                      w_desc=f"tensordesc<fp8e4nv[{qg},128]>", w_scale_ptr="*fp32", sorted_ptr="*i32",
                      block_expert_ptr="*i32", block_rows_ptr="*i32", counts_ptr="*i32", c_ptr="*fp8e4nv",
                      c_scale_ptr="*fp32", T="i32", R="i32"),
                 dict(H=H, I=I, TOP_K=8, BLOCK_M=bm, BLOCK_N=qg, SCALE_BLK=128, FP8_MAX_C=448.0,
                      GROUP_M=cfg["G1_GROUP"], **loc, A_SCALE_SORTED=srt), cfg["G1_WARPS"], cfg["G1_STAGES"],
                 f"g1_tma_bm{bm}_n{qg}_w{cfg['G1_WARPS']}_s{cfg['G1_STAGES']}_g{cfg['G1_GROUP']}_p{int(per)}"
                 f"_as{int(srt)}")
            comp(gemm_tma._gemm2_tma_kernel,
                 dict(c_desc=f"tensordesc<fp8e4nv[{bm // sub},{qg}]>", c_scale_ptr="*fp32",
                      w_desc=f"tensordesc<fp8e4nv[{bn2},{qg}]>", w_scale_ptr="*fp32",
                      block_expert_ptr="*i32", block_rows_ptr="*i32", counts_ptr="*i32", y_ptr="*bf16", R="i32"),
                 dict(H=H, I=I, BLOCK_M=bm // sub, BLOCK_N=bn2, QG=qg, SCALE_BLK=128, GROUP_M=cfg["G2_GROUP"],
                      **loc, SUB=sub),
                 cfg["G2_WARPS"], cfg["G2_STAGES"],
                 f"g2_tma_bm{bm // sub}x{sub}_n{bn2}_q{qg}_w{cfg['G2_WARPS']}_s{cfg['G2_STAGES']}"
                 f"_g{cfg['G2_GROUP']}_p{int(per)}")
        else:
            per = bool(cfg.get("PERSIST"))
            loc = dict(NUM_LOCAL=32, NUM_LOCAL_P2=32, PERSIST=per)
            g1 = dict(H=H, I=I, TOP_K=8, BLOCK_M=bm, BLOCK_N=qg, BLOCK_K=cfg["G1_BLOCK_K"],
                      SCALE_BLK=128, FP8_MAX_C=448.0, GROUP_M=cfg["G1_GROUP"], SPLIT_K=split, **loc)
            comp(gemm._gemm1_kernel,
                 dict(a_ptr="*fp8e4nv", a_scale_ptr="*fp32", w_ptr="*fp8e4nv", w_scale_ptr="*fp32",
                      sorted_ptr="*i32", block_expert_ptr="*i32", block_rows_ptr="*i32",
                      c_ptr="*fp8e4nv", c_scale_ptr="*fp32", part_ptr="*fp32", counts_ptr="*i32", T="i32", R="i32"),
                 g1, cfg["G1_WARPS"], cfg["G1_STAGES"],
                 f"g1_bm{bm}_n{qg}_k{cfg['G1_BLOCK_K']}_w{cfg['G1_WARPS']}_s{cfg['G1_STAGES']}_g{cfg['G1_GROUP']}"
                 f"_sk{split}_p{int(per)}")
            if split > 1:
                comp(gemm._gemm1_splitk_epilogue,
                     dict(part_ptr="*fp32", block_expert_ptr="*i32", block_rows_ptr="*i32",
                          c_ptr="*fp8e4nv", c_scale_ptr="*fp32", R="i32"),
                     dict(I=I, BLOCK_M=bm, BLOCK_N=qg, SPLIT_K=split, FP8_MAX_C=448.0), 4, 1,
                     f"g1epi_bm{bm}_n{qg}_sk{split}")
        comb = bool(cfg["COMBINE"])
        if not cfg.get("TMA"):
            g2 = dict(H=H, I=I, TOP_K=8, BLOCK_M=bm, BLOCK_N=cfg["G2_BLOCK_N"], BLOCK_K=cfg["G2_BLOCK_K"],
                      QG=qg, SCALE_BLK=128, GROUP_M=cfg["G2_GROUP"], COMBINE=comb, **loc)
            comp(gemm._gemm2_kernel,
                 dict(c_ptr="*fp8e4nv", c_scale_ptr="*fp32", w_ptr="*fp8e4nv", w_scale_ptr="*fp32",
                      block_expert_ptr="*i32", block_rows_ptr="*i32",
                      y_ptr="*fp8e4nv" if comb else "*bf16", sorted_ptr="*i32", weights_ptr="*fp32",
                      out_ptr="*bf16", counts_ptr="*i32", R="i32"),
                 g2, cfg["G2_WARPS"], cfg["G2_STAGES"],
                 f"g2_bm{bm}_n{cfg['G2_BLOCK_N']}_k{cfg['G2_BLOCK_K']}_q{qg}_w{cfg['G2_WARPS']}_s{cfg['G2_STAGES']}"
                 f"_g{cfg['G2_GROUP']}_c{int(comb)}_p{int(per)}")
        comp(routing._routing_kernel,
             dict(logits_ptr="*fp32", bias_ptr="*bf16", ids_ptr="*i32", weights_ptr="*fp32",
                  slots_ptr="*i32", counts_ptr="*i32", out_ptr="*bf16" if comb else "*i32",
                  T="i32", local_offset="i32", scaling="fp32"),
             dict(NUM_EXPERTS=256, N_GROUP=8, TOPK_GROUP=4, TOP_K=8, NUM_LOCAL=32,
                  BLOCK_T=cfg["ROUTE_BT"], OUT_H=H if comb else 1, ZERO_OUT=comb),
             cfg["ROUTE_WARPS"], 1, f"route_bt{cfg['ROUTE_BT']}_w{cfg['ROUTE_WARPS']}_z{int(comb)}")
        comp(routing._align_kernel,
             dict(ids_ptr="*i32", slots_ptr="*i32", counts_ptr="*i32", sorted_ptr="*i32",
                  pair_row_ptr="*i32", block_expert_ptr="*i32", block_rows_ptr="*i32",
                  num_pairs="i32", num_blocks="i32", local_offset="i32"),
             dict(NUM_LOCAL=32, NUM_LOCAL_P2=32, BLOCK_M=bm, BLOCK_P=256), 4, 1, f"align_bm{bm}")
        if not comb:
            comp(gemm._reduce_kernel,
                 dict(y_ptr="*bf16", pair_row_ptr="*i32", weights_ptr="*fp32", out_ptr="*bf16", T="i32"),
                 dict(H=H, TOP_K=8, BLOCK_T=cfg["RED_BT"], BLOCK_H=cfg["RED_BH"]),
                 cfg["RED_WARPS"], 1, f"reduce_bt{cfg['RED_BT']}_h{cfg['RED_BH']}_w{cfg['RED_WARPS']}")
    with open(os.path.join(out_dir, "aot.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    bad = [r for r in results if r["spill"] or r["smem"] > 227 * 1024
           or (r["tag"].startswith(("g1_", "g2_")) and r["mma"] == "none")]   # the GEMMs need tensor cores
    print("AOT", len(results), "kernels;", "problems:", bad)
    return results


# ------------------------------------------------------------------------------- GPU sweep
DEV = torch.device("cuda")
SMOKE = False   # --smoke: plumbing check on the CPU (interpreter, quick sizes, a few variants)


class Case:
    """One contest workload: two buffer sets (weights drawn once each), a pool of 4 draws of the
    small inputs, poisoned outputs, and references for (set 0, draw 0) and (set 1, draw 1)."""

    def __init__(self, builtin, workload):
        from kernelwright.inputs import make_generator

        T = workload.axes["seq_len"]
        self.T = T
        self.builtin = builtin
        mk = lambda seed: builtin.make_inputs(builtin.definition, workload,
                                              make_generator(seed, DEV.type), DEV)
        self.sets = [mk(1000 + T * 10 + i) for i in range(2)]
        self.pool = []
        for j in range(4):
            draw = mk(5000 + T * 10 + j)
            self.pool.append({n: draw[n].clone() for n in SMALL})
            del draw
        H = self.sets[0]["hidden_states"].shape[1]
        self.outs = [torch.empty((T, H), dtype=torch.bfloat16, device=DEV) for _ in range(2)]
        self.refs = {}
        for s in (0, 1):
            self.prep_set(s, s)
            self.refs[s] = builtin.reference(**self.sets[s]).float()
        if not SMOKE:
            torch.cuda.synchronize()

    def prep(self, i):
        self.prep_set(i % 2, i % 4)

    def prep_set(self, s, j):
        for n in SMALL:
            self.sets[s][n].copy_(self.pool[j][n])
        self.outs[s].fill_(float("nan"))

    def check(self, s):
        x, y = self.outs[s].float(), self.refs[s]
        if not torch.isfinite(x).all():
            return 0.0
        d = (x - y).abs()
        bad = (d > 1.0) & (d / (y.abs() + 1e-8) > 0.3)
        return 1.0 - bad.float().mean().item()


def load_pkg(folder, name):
    spec = importlib.util.spec_from_file_location(name, Path(folder) / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return importlib.import_module(f"{name}.kernel")


class _CompileOnly:
    """Stands in for a JITFunction: ``fn[grid](...)`` compiles, launches nothing."""

    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.fn.warmup(*args, grid=grid, **kwargs)


def _launched_kernels(module):
    """The JIT functions a host module launches: every one named like a kernel.  Derived, not
    listed, so a new kernel cannot be left out (one left out would run for real on block tables
    that the compile-only align kernel never filled: an illegal address).  Helpers
    (``@jit`` functions called from kernels) keep their names, so the kernels still compile."""
    from triton.runtime.jit import JITFunction

    return tuple(n for n, o in vars(module).items()
                 if isinstance(o, JITFunction) and n.endswith(("_kernel", "_epilogue")))


def precompile(moe_kernel, cases, previous):
    """Compile every variant (and the previous solution's kernels) up front, in parallel threads
    (Triton's async compile)."""
    from kernelwright.solutions.moe_fp8_triton import routing as moe_routing

    t = time.time()
    mods = [(m, _launched_kernels(m)) for m in (moe_kernel, moe_routing)]
    if previous is not None:
        routing = sys.modules[previous.__name__.rsplit(".", 1)[0] + ".routing"]
        mods += [(m, _launched_kernels(m)) for m in (previous, routing)]
    saved = [(m, n, getattr(m, n)) for m, names in mods for n in names]
    for m, n, f in saved:
        setattr(m, n, _CompileOnly(f))
    jobs = 0
    try:
        with ThreadPoolExecutor(16) as pool, triton.AsyncCompileMode(pool, ignore_errors=True):
            for name, (regime, cfg) in VARIANTS.items():
                T = REGIME_TS[regime][0]
                case = cases.get(T)
                if case is None:
                    continue
                try:
                    moe_kernel._forward(**case.sets[0], output=case.outs[0], cfg=normalized_config(moe_kernel, cfg, case))
                    jobs += 1
                except Exception as exc:
                    print("precompile", name, exc, flush=True)
            if previous is not None:
                for T in {1, 901, 14107} & set(cases):
                    try:
                        previous.run(**cases[T].sets[0], output=cases[T].outs[0])
                        jobs += 1
                    except Exception as exc:
                        print("precompile previous", T, exc, flush=True)
    finally:
        for m, n, f in saved:
            setattr(m, n, f)
    print(f"precompiled {jobs} configurations in {time.time() - t:.1f} s", flush=True)


def normalized_config(moe_kernel, cfg, case):
    """The config as run() normalises it (K-step clamps), for direct _forward calls."""
    cfg = dict(cfg)
    H = case.sets[0]["hidden_states"].shape[1]
    I = case.sets[0]["gemm2_weights"].shape[2]
    if cfg["G1_BLOCK_K"] >= 128:
        cfg["G1_BLOCK_K"] = moe_kernel._largest_divisor_tile(H, cfg["G1_BLOCK_K"])
    cfg["G2_BLOCK_K"] = max(cfg["QG"], moe_kernel._largest_divisor_tile(I, cfg["G2_BLOCK_K"]))
    cfg["G1_SPLIT_K"] = int(cfg.get("G1_SPLIT_K", 1))     # as run() fills it in
    return cfg


def sweep(args) -> None:
    """The ``sweep`` command (see the module docstring)."""
    global DEV, SMOKE, TS, VARIANTS, REGIME_TS, RANGES, VALIDATE
    if args.only:
        VARIANTS = _selected(args.only)
    if args.smoke:
        DEV, SMOKE = torch.device("cpu"), True
        TS = [3, 5, 20]
        VARIANTS = {n: (rg, dict(c, ROUTE_BT=8, RED_BT=8)) for n, (rg, c) in VARIANTS.items()
                    if n in ("d0", "d3", "m1", "p0", "p2")}
        REGIME_TS = {"decode": [3, 5], "mid": [20], "prefill": [20]}
        RANGES = [(1, "decode", [3]), (16, "decode", [5]), (4096, "mid", [20]),
                  (None, "prefill", [20])]
        VALIDATE = [(2, 0), (9, 32)]
    t0 = time.time()
    from kernelwright.definitions import get, quick_name
    from kernelwright.solutions.moe_fp8_triton import kernel as moe_kernel

    print(torch.cuda.get_device_name() if not SMOKE else "cpu", "torch", torch.__version__,
          "triton", triton.__version__, flush=True)
    builtin = get(quick_name("moe") if SMOKE else "moe")
    wls = {w.axes["seq_len"]: w for w in builtin.public_workloads()}
    ts = [int(x) for x in args.ts.split(",")] if args.ts else TS
    if SMOKE:
        w0 = builtin.public_workloads()[0]
        wls = {T: w0.model_copy(update={"axes": {"seq_len": T}}) for T in ts + [57]}
    if args.every_t:
        REGIME_TS = {regime: list(ts) for regime in REGIME_TS}
        for T in ts:
            if T not in wls:
                wls[T] = wls[57].model_copy(update={"axes": {"seq_len": T}})
    cases = {T: Case(builtin, wls[T]) for T in ts}
    print(f"inputs + references ready at {time.time() - t0:.1f} s", flush=True)
    previous = load_pkg(args.previous, "moe_previous") if args.previous else None
    if not SMOKE:
        precompile(moe_kernel, cases, previous)
    timer = Timer(DEV, SMOKE)
    rows = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def save():
        (out / "moe_variants.json").write_text(json.dumps(rows, indent=1))

    def measure(T, name, cfg):
        case = cases[T]
        row = {"T": T, "variant": name}
        try:
            call = lambda i: moe_kernel.run(**case.sets[i % 2], output=case.outs[i % 2], config=cfg)
            row["ev"] = timer.loop(call, case.prep, busy=False, warm=WARM, n=N)
            row["dev"] = timer.loop(call, case.prep, busy=True, warm=1, n=12)
            m = []
            for s in (0, 1):
                case.prep_set(s, s)
                moe_kernel.run(**case.sets[s], output=case.outs[s], config=cfg)       # graph replay
                m.append(case.check(s))
            case.prep_set(0, 0)
            moe_kernel.run(**case.sets[0], output=case.outs[0], config=cfg, graph=False)
            m.append(case.check(0))
            row["matched"] = min(m)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            traceback.print_exc(limit=4)
        rows.append(row)
        print(json.dumps(row), flush=True)
        moe_kernel._graphs.clear()
        return row

    # the previous solution exactly as it shipped (eager) and the shipped table, at every T
    for T in ts:
        case = cases[T]
        if previous is not None:
            row = {"T": T, "variant": "previous-eager"}
            try:
                row["ev"] = timer.loop(lambda i: previous.run(**case.sets[i % 2], output=case.outs[i % 2]),
                                       case.prep, busy=False, warm=WARM, n=N)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
        row = {"T": T, "variant": "shipped-eager"}
        try:
            row["ev"] = timer.loop(lambda i: moe_kernel.run(**case.sets[i % 2], output=case.outs[i % 2],
                                                   graph=False), case.prep, busy=False, warm=WARM, n=N)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    save()
    # the sweep
    for name, (regime, cfg) in VARIANTS.items():
        for T in REGIME_TS[regime]:
            if T not in cases:
                continue
            if time.time() - t0 > args.budget:
                print("budget exhausted: skipping", name, T, flush=True)
                continue
            measure(T, name, cfg)
        save()

    # choose per range; a variant qualifies only if correct at every T it was measured at
    ok = {}
    for r in rows:
        if r["variant"] in VARIANTS:
            good = "error" not in r and r.get("matched", 0) >= 0.93
            ok[r["variant"]] = ok.get(r["variant"], True) and good
    ev = {(r["T"], r["variant"]): r["ev"] for r in rows if "ev" in r}
    table, chosen = [], {}
    for max_t, regime, pts in RANGES:
        cands = [n for n, (rg, _) in VARIANTS.items() if rg == regime and ok.get(n)
                 and all((t, n) in ev for t in pts if t in cases)]
        pts = [t for t in pts if t in cases]
        if not cands or not pts:
            continue
        best = min(cands, key=lambda n: sum(math.log(ev[(t, n)]) for t in pts))
        chosen[str(max_t)] = best
        table.append((max_t, dict(VARIANTS[best][1])))
    merged = []
    for max_t, cfg in table:
        if merged and merged[-1][1] == cfg:
            merged[-1] = (max_t, cfg)
        else:
            merged.append((max_t, cfg))
    if merged:
        merged[-1] = (None, merged[-1][1])
    # the chosen table at T values between the measured ones (hidden-workload sizes, other
    # offsets): run() exactly as shipped, graph path (eager + capture, then a replay on new
    # contents) and eager, against the reference
    valid = {}
    if merged and len(chosen) == len(RANGES):
        from kernelwright.solutions.moe_fp8_triton import configs

        saved = configs.CONFIGS
        configs.CONFIGS = tuple(merged)
        moe_kernel._graphs.clear()
        template = wls[57]
        for T, off in VALIDATE:
            if time.time() - t0 > args.budget + 40:
                valid[T] = "skipped (time)"
                continue
            try:
                ins = dict(template.inputs)
                ins["local_expert_offset"] = type(ins["local_expert_offset"])(value=off)
                wl = template.model_copy(update={"axes": {"seq_len": T}, "inputs": ins})
                case = Case(builtin, wl)
                m = []
                for s_ in (0, 1):
                    case.prep_set(0, s_)
                    if s_ == 1:
                        case.refs[0] = builtin.reference(**case.sets[0]).float()
                    moe_kernel.run(**case.sets[0], output=case.outs[0])          # eager+capture, replay
                    m.append(case.check(0))
                case.prep_set(1, 1)
                moe_kernel.run(**case.sets[1], output=case.outs[1], graph=False)
                m.append(case.check(1))
                valid[T] = min(m)
            except Exception as exc:
                valid[T] = f"{type(exc).__name__}: {str(exc)[:200]}"
                traceback.print_exc(limit=4)
            print("validate", T, off, valid[T], flush=True)
            moe_kernel._graphs.clear()
        configs.CONFIGS = saved
    passed = bool(valid) and all(isinstance(v, float) and v >= 0.93 for v in valid.values()
                                 if v != "skipped (time)")
    summary = {"chosen": chosen, "table": merged, "validate": valid, "rows": rows}
    (out / "moe_variants.json").write_text(json.dumps(summary, indent=1))
    if args.apply and merged and len(chosen) == len(RANGES) and passed:
        write_table(args.apply, merged)
        print("applied to", args.apply, chosen, flush=True)
    else:
        print("NOT applied", chosen, valid, flush=True)

    # compact table: T x variant (ev / dev us, matched)
    print("\nT      variant            ev_us    dev_us  matched")
    for r in rows:
        print(f"{r['T']:<6} {r['variant']:<18} {r.get('ev', float('nan')):8.1f} "
              f"{r.get('dev', float('nan')):8.1f}  {r.get('matched', float('nan')):.3f}"
              f"{'  ' + r['error'][:60] if 'error' in r else ''}")
    print("chosen:", chosen, f"total {time.time() - t0:.0f} s", flush=True)


def _selected(only: str) -> Dict[str, Tuple[str, dict]]:
    wanted = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in VARIANTS]
    if unknown:
        sys.exit(f"unknown variant(s) {unknown}; known: {sorted(VARIANTS)}")
    return {n: VARIANTS[n] for n in wanted}


# ------------------------------------------------------------------------------- once (profiler)
def profile_once(seq_len: int, calls: int) -> float:
    """``calls`` eager calls of the shipped solution on the contest workload with this seq_len,
    inputs drawn by the gate's own generator; returns the last call's device time (µs, CUDA
    events).  Raises ValueError when no contest workload has that seq_len."""
    from kernelwright import definitions
    from kernelwright.gate import fresh
    from kernelwright.solutions.moe_fp8_triton import kernel as moe_kernel

    d = definitions.get("moe")
    w = next((w for w in d.public_workloads() if w.axes["seq_len"] == seq_len), None)
    if w is None:
        raise ValueError(f"no contest workload with seq_len={seq_len}")
    dev = torch.device("cuda")
    ins = fresh.expand(d, w, 1234 + seq_len, dev)
    out = torch.empty((seq_len, 7168), dtype=torch.bfloat16, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(calls):
        start.record()
        moe_kernel.run(**ins, output=out, graph=False)
        end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3


# ------------------------------------------------------------------------------- command line
def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelwright.tuning.moe",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sw = sub.add_parser("sweep", help="GPU: measure variants, choose a table (--apply: write it)")
    sw.add_argument("--out", default="/tmp/moe-variants")
    sw.add_argument("--previous", default=None, help="folder with a previous copy of the solution, timed eagerly")
    sw.add_argument("--apply", default=None, help="configs.py whose CONFIGS the chosen table replaces")
    sw.add_argument("--budget", type=float, default=240.0, help="seconds; variants past it are skipped")
    sw.add_argument("--ts", default=None, help="comma-separated T subset")
    sw.add_argument("--smoke", action="store_true", help="CPU plumbing check (interpreter)")
    sw.add_argument("--only", default=None, help="comma-separated variant names (default: all)")
    sw.add_argument("--every-t", action="store_true",
                    help="measure every selected variant at every --ts point, not only at its regime's points "
                         "(T values without a contest workload get one: the T=57 workload with seq_len changed)")
    ao = sub.add_parser("aot", help="CPU: sm_90a compile of the variants' kernels")
    ao.add_argument("out_dir")
    pick = ao.add_mutually_exclusive_group()
    pick.add_argument("--only", default=None, help="comma-separated variant names (default: all)")
    pick.add_argument("--table", action="store_true", help="the shipped table's rows instead of VARIANTS")
    ab = sub.add_parser("ab-folder", help="a copy of the shipped solution with some table rows changed")
    ab.add_argument("out", type=Path, help="folder to write (replaced if it exists)")
    ab.add_argument("--name", required=True, help="solution name of the copy")
    ab.add_argument("--set", action="append", default=[], metavar="MAX_T:KEY=VALUE,...",
                    help='update the row whose max T is MAX_T ("None": the last row); values are Python literals')
    once = sub.add_parser("once", help="GPU: a few eager calls at one contest T, for a profiler")
    once.add_argument("--seq-len", type=int, default=7, help="a contest workload's seq_len (T)")
    once.add_argument("--calls", type=int, default=3, help="eager calls (the first compiles)")
    args = ap.parse_args(argv)

    if args.command == "sweep":
        sweep(args)
    elif args.command == "aot":
        if args.table:
            variants = {f"entry{n}": ("x", dict(cfg)) for n, (_, cfg) in enumerate(read_table())}
        else:
            variants = _selected(args.only) if args.only else VARIANTS
        aot(args.out_dir, variants)
    elif args.command == "ab-folder":
        try:
            table = ab_folder(args.out, args.name, [parse_set(s) for s in args.set], "; ".join(args.set))
        except ValueError as exc:
            sys.exit(f"error: {exc}")
        print(json.dumps({"name": args.name, "sets": args.set, "table": table}))
    else:
        try:
            us = profile_once(args.seq_len, args.calls)
        except ValueError as exc:
            sys.exit(str(exc))
        print(f"T={args.seq_len}: last eager call {us:.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
