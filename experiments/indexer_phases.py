"""Where does the indexer's device time go?  Per-kernel times and an in-kernel phase timeline of
the shipped solution (both paths), with the recipe's kernels beside them.

Run on the H200 (one call, ~2-3 minutes):

    PYTHONPATH=src python3 experiments/indexer_phases.py --out $OUT
    PY_ARGS="experiments/indexer_phases.py --out /tmp/records/phases" bash scripts/h200.sh py pack

Per shape (batch x block-table pages):
  * device time of the shipped call (its own CUDA graph, replayed behind a sleep kernel after an
    L2 flush; tuning.dsa's clock) and of the recipe (DeepGEMM logits + FlashInfer top-k,
    metadata precomputed), each checked with tuning.dsa's gate-rule check;
  * per-kernel device time of both from the torch profiler (CUPTI) over graph replays;
  * a phase timeline from an instrumented copy of the path's module: ``%globaltimer`` stamps
    (ns) kept with global atomic min / max in a probe buffer at: first / last program start,
    last scoring done, last threshold done (long rows), first / last filter program start, last
    filter tile done, select start / end (the row's last arriver), and the largest candidate
    count.  The copy is the shipped source with stamp calls inserted at fixed anchors (asserted
    to occur once), so the timeline is of the same code plus ~20 atomics per program.

Output: ``phases.json`` under --out and a table on stdout.  The answer goes to
docs/history/indexer.md ("Where the time goes").
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

from kernelwright.solutions.dsa_indexer_triton import common as COMMON
from kernelwright.solutions.dsa_indexer_triton import kernel as SHIPPED
from kernelwright.tuning import dsa as D

LONG = ((1, 256), (1, 1024), (1, 2048), (4, 512), (16, 512), (64, 256), (64, 1024))
SHORT = ((1, 64), (16, 64), (64, 64), (30, 91), (1, 128), (64, 128))
SLOTS = ("start_first", "start_last", "scored_last", "threshold_last", "filter_first",
         "filter_last", "filtered_last", "select_start", "select_end", "arrive_last", "candidates",
         "ftile_loaded", "ftile_scanned", "ftile_cursor", "select_loaded", "select_searched")
MIN_SLOTS = (0, 4)
INT64_MAX = (1 << 63) - 1

STAMP_HELPERS = '''
from triton.language.extra.cuda import globaltimer as _globaltimer
_PROBE_ADDR = tl.constexpr({addr})


@triton.jit
def _stamp(slot: tl.constexpr, first: tl.constexpr):
    p = tl.full([], _PROBE_ADDR, tl.int64).to(tl.pointer_type(tl.int64)) + slot
    if first:
        tl.atomic_min(p, _globaltimer(), sem="relaxed")
    else:
        tl.atomic_max(p, _globaltimer(), sem="relaxed")


@triton.jit
def _note(slot: tl.constexpr, value):
    p = tl.full([], _PROBE_ADDR, tl.int64).to(tl.pointer_type(tl.int64)) + slot
    tl.atomic_max(p, value.to(tl.int64), sem="relaxed")
'''

# (anchor, replacement): each anchor must occur exactly once in the module source.
def _after(anchor, insert):
    return anchor, anchor + insert


_FUSED_SELECT_END = "                         TOPK, TOPK_BLOCK, PS, TILE, PIVOTS)\n"
_RESIDENT_SELECT_END = "                     TOPK, TOPK_BLOCK, PS, TILE, PIVOTS)\n"
LONG_PATCHES = (
    _after("    item = tl.program_id(0)\n", "    _stamp(0, True)\n    _stamp(1, False)\n"),
    _after("                         H, D, PS, ROW_BYTES, PAGES_PER_ITEM, HIST_BITS, STAGES)\n",
           "            _stamp(2, False)\n"),
    _after("            if arrived == row_items - 1:\n", "                _stamp(9, False)\n"),
    _after("                thr, above, inside = _threshold_bin(hist_row, stripes, TOPK, HIST_BITS, MAX_STRIPES)\n",
           "                _stamp(3, False)\n                _note(10, inside)\n"),
    _after("    j = tl.program_id(1)\n", "    _stamp(4, True)\n    _stamp(5, False)\n"),
    _after("                     cursor_ptr + b, j * TILE, seq, thr, zero, zero, TILE, PS, HIST_BITS, True)\n",
           "        _stamp(6, False)\n"),
    _after("            tl.store(cursor_ptr + b, tl.full([], 0, tl.int64))\n", "            _stamp(7, False)\n"),
    _after("                               CAND_TILE)\n", "            _stamp(8, False)\n"),
    # inside _filter_tile (the two-launch filter's tiles; the one-launch select's steps too)
    _after("    key = _order_key(tl.load(score_row + offs, mask=valid, other=0.0, cache_modifier=\".cg\"))\n",
           "    _stamp(11, False)\n"),
    _after("    n_eq = tl.sum(eq.to(tl.int32), axis=0)\n", "    _stamp(12, False)\n"),
    _after("        base_eq = (bases >> 32).to(tl.int32)\n", "        _stamp(13, False)\n"),
    # inside _select_resident (candidates held in registers)
    _after("    ids = tl.load(cand_id_row + offs, mask=valid, other=0, cache_modifier=\".cg\")\n",
           "    _stamp(14, False)\n"),
    _after("        lo, hi, c_hi = _bisect_step(lo, hi, c_hi, cnt, mid, k)\n    t32 = lo.to(tl.int32)\n    gt = valid & (key > t32)\n",
           "    _stamp(15, False)\n"),
)
SHORT_PATCHES = (
    # _fused_kernel (4K / 16K tiles)
    _after("    p_lo = chunk * (GPP * PPD)\n", "    _stamp(0, True)\n    _stamp(1, False)\n"),
    _after("    # Every thread's score stores precede the (gpu-scope, release) arrival.\n", "    _stamp(2, False)\n"),
    _after("        tl.store(cnt_ptr + b, 0)\n", "        _stamp(7, False)\n"),
    (_FUSED_SELECT_END + "\n\n@triton.jit\ndef _topk_resident_kernel",
     _FUSED_SELECT_END + "        _stamp(8, False)\n\n\n@triton.jit\ndef _topk_resident_kernel"),
    # _score_kernel + _topk_resident_kernel (8K tiles)
    _after("    p_lo = chunk * PAGES_PER_PROG\n", "    _stamp(0, True)\n    _stamp(1, False)\n"),
    _after("            tl.store(score_ptr + b * stride_sb + tok, score, mask=(offs_t < PS) & in_row)\n",
           "    _stamp(2, False)\n"),
    _after('    """Split path, after _score_kernel: the top-k of one row held in registers, grid (B,)."""\n',
           "    _stamp(4, True)\n    _stamp(7, False)\n"),
    (_RESIDENT_SELECT_END + "\n\n@triton.jit\ndef _topk_kernel",
     _RESIDENT_SELECT_END + "    _stamp(8, False)\n\n\n@triton.jit\ndef _topk_kernel"),
)


def instrumented(module_name: str, patches, probe_addr: int, workdir: Path):
    """A copy of the solution's ``module_name`` (with common.py beside it) with stamps inserted."""
    src_dir = Path(SHIPPED.__file__).parent
    pkg = workdir / f"idxprobe_{module_name}"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "common.py").write_text((src_dir / "common.py").read_text())
    text = (src_dir / f"{module_name}.py").read_text()
    head, sep, rest = text.partition("from .common import")
    assert sep, "import anchor"
    line_end = rest.index("\n") + 1
    text = head + sep + rest[:line_end] + STAMP_HELPERS.format(addr=probe_addr) + rest[line_end:]
    for anchor, replacement in patches:
        assert text.count(anchor) == 1, f"anchor not unique in {module_name}: {anchor!r}"
        text = text.replace(anchor, replacement)
    (pkg / f"{module_name}.py").write_text(text)
    sys.path.insert(0, str(workdir))
    return importlib.import_module(f"{pkg.name}.{module_name}")


def register_cap(fn, module_name):
    """The shipped MAXNREG cap of the kernel that ``fn`` (an instrumented copy) copies, or None."""
    return next((cap for k, cap in SHIPPED.MAXNREG.items()
                 if k.__name__ == fn.__name__ and k.fn.__module__.endswith("." + module_name)), None)


def timeline(case, mod, probe, n=30):
    """Median phase offsets (us from the first program's start) over n instrumented calls."""
    shapes = COMMON.call_shapes(case.sets[0]["q_index_fp8"], case.sets[0]["k_index_cache_fp8"],
                                case.sets[0]["weights"], case.sets[0]["block_table"], case.outs[0][0])
    s = case.sets[0]
    launches, scratch = mod.launches(shapes, s["q_index_fp8"], *COMMON.k_cache_views(s["k_index_cache_fp8"]),
                                     s["weights"], s["seq_lens"], s["block_table"], case.outs[0][0])
    init = torch.zeros_like(probe)
    init[list(MIN_SLOTS)] = INT64_MAX
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for i in range(n + 3):
        case.prep0(i)
        probe.copy_(init)
        flush.zero_()
        torch.cuda._sleep(400_000)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for fn, grid, args, meta in launches:
            cap = register_cap(fn, mod.__name__.rsplit(".", 1)[-1])
            fn[grid](*args, **(dict(meta, maxnreg=cap) if cap else meta))
        end.record()
        torch.cuda.synchronize()
        if i < 3:
            continue
        v = probe.tolist()
        t0 = v[0]
        row = {"events_us": start.elapsed_time(end) * 1e3, "raw": v}
        for k, name in enumerate(SLOTS):
            if name == "candidates":
                row[name] = v[k]
            elif v[k] not in (0, INT64_MAX):
                row[name] = (v[k] - t0) / 1e3
        rows.append(row)
    check = D.idx_check(case, 0)
    keys = sorted({k for r in rows for k in r if k != "raw"})
    med = {k: statistics.median(r[k] for r in rows if k in r) for k in keys}
    med["check"] = check
    # the timer's tick: the smallest positive difference between two stamps of one call
    med["tick_ns"] = min((abs(a - b) for r in rows for a in r["raw"] for b in r["raw"]
                          if 0 < abs(a - b) < 1 << 40), default=0)
    med["raw"] = [r["raw"] for r in rows]
    del scratch
    return med


def profile(call, n=5):
    from torch.profiler import ProfilerActivity, profile as tprofile
    call()
    call()
    torch.cuda.synchronize()
    with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            call()
        torch.cuda.synchronize()
    names = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            k = names.setdefault(ev.name[:60], [0, 0.0])
            k[0] += 1
            k[1] += ev.time_range.elapsed_us()
    return {name: [c / n, t / n] for name, (c, t) in names.items()}


def recipe_fns():
    try:
        from kernelwright.baselines.indexer_deepgemm_flashinfer import kernel as R
        R._deep_gemm()
        R._top_k_page_table_transform()
        return R
    except Exception as exc:  # the baseline wheels are not here: no recipe rows
        print("recipe unavailable:", type(exc).__name__, str(exc)[:200])
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="/tmp/indexer-phases")
    ap.add_argument("--budget", type=float, default=400.0, help="seconds")
    ap.add_argument("--shapes", default=None, help="BxP,BxP,... (default: LONG + SHORT)")
    ap.add_argument("--no-recipe", action="store_true", help="leave the recipe out")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    probe = torch.zeros(len(SLOTS), dtype=torch.int64, device="cuda")
    work = Path(tempfile.mkdtemp())
    mods = {"long_rows": instrumented("long_rows", LONG_PATCHES, probe.data_ptr(), work),
            "short_rows": instrumented("short_rows", SHORT_PATCHES, probe.data_ptr(), work)}
    recipe = None if args.no_recipe else recipe_fns()
    shapes = LONG + SHORT if not args.shapes else tuple(tuple(int(x) for x in t.split("x")) for t in args.shapes.split(","))
    timer = D.DsaTimer(D.DEV, False, busy_cycles=400_000)
    results = []
    for batch, pages in shapes:
        if time.time() - t_start > args.budget:
            print("budget spent; stopping before", batch, pages)
            break
        row = {"shape": f"{batch}x{pages}", "path": SHIPPED.path_for(pages, 64, 2048)}
        try:
            case = D.idx_case(batch, pages)
            SHIPPED._entries.clear()
            call = D.idx_call(SHIPPED, case)
            row["shipped_gr"], row["shipped_dev"] = timer.graph(lambda: call(0), case.prep0)
            row["shipped_check"] = D.idx_check(case, 0)
            row["shipped_kernels"] = profile(lambda: call(0))
            row["timeline"] = timeline(case, mods[row["path"]], probe)
            if recipe is not None:
                s = case.sets[0]
                state = recipe.prepare_premeta(s["q_index_fp8"], s["k_index_cache_fp8"], s["weights"],
                                               s["seq_lens"], s["block_table"])
                holder = {}

                def rcall():
                    holder["out"] = recipe.run_premeta(s["q_index_fp8"], s["k_index_cache_fp8"], s["weights"],
                                                       s["seq_lens"], s["block_table"], state=state)
                row["recipe_gr"], row["recipe_dev"] = timer.graph(rcall, case.prep0)
                rcall()
                case.outs[0][0].copy_(holder["out"])
                row["recipe_check"] = D.idx_check(case, 0)
                row["recipe_kernels"] = profile(rcall)
            del case
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
            traceback.print_exc(limit=4)
        results.append(row)
        print(json.dumps(row), flush=True)
        (out / "phases.json").write_text(json.dumps(results, indent=1))
    print_table(results)


def print_table(results):
    print("\n=== indexer phases (us from the first program's start; device us behind a sleep kernel) ===")
    cols = ("start_last", "scored_last", "arrive_last", "threshold_last", "filter_first", "ftile_loaded",
            "ftile_scanned", "ftile_cursor", "filtered_last", "select_start", "select_loaded", "select_searched",
            "select_end")
    print(f"{'shape':>8} {'path':>10} {'dev':>6} {'recipe':>6} {'ev(probe)':>9} " + " ".join(f"{c[:10]:>10}" for c in cols) + "  cand  checks")
    for r in results:
        t = r.get("timeline", {})
        vals = " ".join(f"{t[c]:10.2f}" if c in t else f"{'-':>10}" for c in cols)
        print(f"{r['shape']:>8} {r['path']:>10} {r.get('shipped_dev', float('nan')):6.1f} {r.get('recipe_dev', float('nan')):6.1f} "
              f"{t.get('events_us', float('nan')):9.1f} {vals}  {t.get('candidates', '-')!s:>5} "
              f"{r.get('shipped_check')}/{t.get('check')}/{r.get('recipe_check', '-')} {r.get('error', '')}")
    for r in results:
        for who in ("shipped_kernels", "recipe_kernels"):
            if who in r:
                print(f"{r['shape']:>8} {who[:-8]:>8}: " + ", ".join(f"{n[:40]} x{c:g} {t:.1f}us" for n, (c, t) in r[who].items()))


if __name__ == "__main__":
    sys.exit(main())
