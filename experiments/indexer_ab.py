"""Is a candidate copy of the indexer solution faster than the shipped one, shape by shape?

Run on the H200, with the candidate's package folder (a copy of
``src/kernelwright/solutions/dsa_indexer_triton``) somewhere importable:

    PYTHONPATH=src python3 experiments/indexer_ab.py --path .carry --candidate idx_new --out $OUT \
        [--toggle short_rows.HIST=False --toggle long_rows.INTERPOLATE=False]

Per shape (batch x block-table pages) the shipped solution and the candidate (and the candidate
with each ``--toggle MODULE.NAME=VALUE`` applied alone) run through their own ``run`` (CUDA
graph per call signature), checked with tuning.dsa's gate-rule check, timed by tuning.dsa's
clock (device time: the graph replayed behind a sleep kernel after an L2 flush; the median of
its iterations), in the order shipped, candidate, toggles, shipped again (the spread of the two
shipped rows is the run's noise at that shape).

Output: ``ab.json`` under --out and a table on stdout (us, candidate / shipped).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

from kernelwright.solutions.dsa_indexer_triton import kernel as SHIPPED
from kernelwright.tuning import dsa as D

SHAPES = ((1, 20), (15, 40), (30, 91), (16, 64), (1, 64), (64, 64), (1, 128), (64, 128),
          (1, 256), (4, 256), (64, 256), (1, 512), (16, 512), (1, 1024), (4, 1024), (1, 2048),
          (32, 2048))


def parse_toggle(text):
    """'MODULE.NAME=VALUE[;MODULE.NAME=VALUE...]' -> (label, [(module, name, value)])."""
    settings = []
    for part in text.split(";"):
        target, value = part.split("=", 1)
        module, name = target.strip().rsplit(".", 1)
        settings.append((module, name, ast.literal_eval(value)))
    return text, settings


def timed(timer, mod, case):
    mod._entries.clear()
    call = D.idx_call(mod, case)
    gr, dev = timer.graph(lambda: call(0), case.prep0)
    return {"gr": gr, "dev": dev, "check": D.idx_check(case, 0)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidate", required=True, help="importable package name of the candidate copy")
    ap.add_argument("--path", action="append", default=[], help="a folder to import the candidate from")
    ap.add_argument("--toggle", action="append", default=[],
                    help="MODULE.NAME=VALUE[;MODULE.NAME=VALUE...] in the candidate package, timed as one variant")
    ap.add_argument("--shapes", default=None, help="BxP,BxP,... (default: a contest + envelope set)")
    ap.add_argument("--out", default="/tmp/indexer-ab")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sys.path[:0] = args.path
    cand = importlib.import_module(f"{args.candidate}.kernel")
    toggles = [parse_toggle(t) for t in args.toggle]
    shapes = SHAPES if not args.shapes else tuple(tuple(int(x) for x in s.split("x")) for s in args.shapes.split(","))
    timer = D.DsaTimer(D.DEV, False, busy_cycles=400_000)
    t0 = time.time()
    rows = []
    for batch, pages in shapes:
        if time.time() - t0 > args.budget:
            print("budget spent before", batch, pages)
            break
        row = {"shape": f"{batch}x{pages}", "path": SHIPPED.path_for(pages, 64, 2048)}
        try:
            case = D.idx_case(batch, pages)
            row["shipped"] = timed(timer, SHIPPED, case)
            row["candidate"] = timed(timer, cand, case)
            for label, settings in toggles:
                saved = []
                for module, name, value in settings:
                    m = importlib.import_module(f"{args.candidate}.{module}")
                    saved.append((m, name, getattr(m, name)))
                    setattr(m, name, value)
                try:
                    row[label] = timed(timer, cand, case)
                finally:
                    for m, name, value in reversed(saved):
                        setattr(m, name, value)
            row["shipped_again"] = timed(timer, SHIPPED, case)
            del case
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            traceback.print_exc(limit=4)
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "ab.json").write_text(json.dumps(rows, indent=1))
    print("\n=== indexer A/B (device us; ratio = variant / mean of the two shipped rows) ===")
    for r in rows:
        if "error" in r:
            print(f"{r['shape']:>8} {r['error']}")
            continue
        base = (r["shipped"]["dev"] + r["shipped_again"]["dev"]) / 2
        variants = [k for k in r if isinstance(r[k], dict)]
        print(f"{r['shape']:>8} {r['path']:>10}  shipped {base:.1f} us")
        for k in variants:
            print(f"{'':>20} {k[:60]:<60} {r[k]['dev']:7.1f} {r[k]['dev'] / base:5.2f} {r[k]['check']}")


if __name__ == "__main__":
    sys.exit(main())
