"""DSA top-k indexer across the serving envelope on one CUDA device: gate-checked correctness and
device time of the shipped solution's two paths (each forced at every shape) and the contest recipe.

Run on the H200 (one call, about 4-5 minutes; prints a table last):

    PYTHONPATH=src python3 experiments/indexer_envelope.py --out $OUT
    bash scripts/h200.sh envelope pack          # the same with the carried baseline wheels

Shapes: batch 1, 4, 16, 32, 64 x context 4K ... 128K tokens (max_num_pages = context / 64,
num_pages = batch x max_num_pages) plus contest-like ones (B = 15 / 2.5K, B = 30 / 5.8K, two
with <= 2048 tokens).  Inputs come from the definition's own ``make_inputs`` (seq_lens uniform
in [1, context] with one full row, distinct pages); every timed iteration first copies a fresh
draw of the small inputs (q, weights, seq_lens, block_table: a pool of 4 draws made with the
definition's input helpers) into one of two buffer sets, so results are recomputed each time.

Kernels:
  long    kernelwright.solutions.dsa_indexer_triton.kernel with FORCE_PATH = "long_rows" (the
          long-row path, long_rows.py, at every width)
  short   the same with FORCE_PATH = "short_rows" (short_rows.py); the shipped solution is the
          one of the two that kernel.path_for picks (block-table width >= LONG_ROW_MIN_PAGES:
          long), marked in the table's "shipped" column; ``--shipped-only`` measures only that one
  old     ``--old-kernel FILE``: a single-file kernel module (e.g. a kernel.py from before the
          split into paths), when given
  recipe  the baseline indexer_deepgemm_flashinfer_premeta (DeepGEMM
          fp8_paged_mqa_logits + FlashInfer top_k_page_table_transform, metadata in its
          untimed prepare); skipped with the reason if it does not import

Device time (host launch hidden): per iteration the L2 is flushed (a 256 MB write), then a
``torch.cuda._sleep`` cushion (~200 us, calibrated) is queued, then the start event, the call,
the end event; the median of >= 20 iterations.  The host time of enqueueing the call is
recorded too: a median above the cushion flags the row ("cushion short").  ``graph``: the same
call captured once in a CUDA graph by this script and replayed behind the same cushion.

Every kernel's outputs go through the gate's checker (``check_outputs`` with the definition's
checker and tolerance) against the definition's reference on the inputs they were computed on.
One failing shape or kernel prints its error and the run goes on.  A budget (``--budget``)
skips what no longer fits: sweeps first, then the other path's and the recipe rows of the
largest shapes.

Output: ``envelope.json`` under --out (one row per shape and kernel, the sweep rows of the
long-row path's plan constants, the device and the method), the log on stdout, and the table
last: per shape the path the shipped dispatch takes, the long-row plan, the shipped path's device
and graph microseconds, the K-cache bytes its rows touch, achieved TB/s on those bytes, the floor
(bytes / 4.27 TB/s) and the issue-18 target (2 x floor + 5 us), both paths' and the recipe's
microseconds, recipe / shipped and short / long.
"""

from __future__ import annotations

import os
import sys

if "--smoke" in sys.argv:       # the interpreter must be chosen before triton is imported
    os.environ.setdefault("TRITON_INTERPRET", "1")

import argparse
import contextlib
import importlib.util
import json
import signal
import statistics
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import triton

from kernelwright.definitions import get as get_definition
from kernelwright.gate.checkers import check_outputs
from kernelwright.inputs import make_generator, random_tensor, synth_block_table, synth_seq_lens
from kernelwright.solutions.dsa_indexer_triton import kernel as SHIPPED
from kernelwright.solutions.dsa_indexer_triton import long_rows as LONG
from kernelwright.solutions.dsa_indexer_triton import short_rows as SHORT
from kernelwright.trace import RandomInput, Workload, torch_dtype

HBM_TBPS = 4.27
TOPK = 2048
PS = 64
PAGE_BYTES = PS * 132
BATCHES = (1, 4, 16, 32, 64)
CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072)
CONTEST = ((1, 20), (16, 32), (15, 40), (30, 91))      # (batch, max_num_pages)
# Shapes with a recipe time quoted in issue 18: measured first.
KEY_SHAPES = ((1, 2048), (64, 256), (16, 512))
SMALL = ("q_index_fp8", "weights", "seq_lens", "block_table")
# Sweep of the long-row path's plan constants: (label, long_rows overrides) on a few shapes.
SWEEP_SHAPES = ((30, 91), (15, 40), (16, 64), (64, 128), (4, 256), (64, 256), (1, 2048), (16, 512))
SWEEP = (
    ("two-launch", {"_ONE_LAUNCH_MAX_TOKENS": 0}),
    ("one-launch<=16K", {"_ONE_LAUNCH_MAX_TOKENS": 16384}),
    ("items/program 1", {"_ITEMS_PER_PROGRAM": 1}),
    ("items/program 4", {"_ITEMS_PER_PROGRAM": 4}),
    ("stages 3", {"_SCORE_STAGES": 3}),
    ("hist bits 12", {"_HIST_BITS": 12}),
)

DEV = torch.device("cuda")
SMOKE = False


# ------------------------------------------------------------------------------------ timing
class Clock:
    """Device time of one call behind a sleep cushion, after an L2 flush."""

    def __init__(self, cushion_us: float, iters: int, warm: int):
        self.iters, self.warm = iters, warm
        if SMOKE:
            self.cycles_per_us = 0.0
            self.cushion_us = 0.0
            return
        self.flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device=DEV)
        self.cycles_per_us = self._calibrate()
        self.cushion_us = cushion_us
        self.cycles = int(cushion_us * self.cycles_per_us)

    @staticmethod
    def _calibrate() -> float:
        cycles = 1_000_000
        torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(3):
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) * 1e3)
        return cycles / best

    def measure(self, call, prep):
        """{us: median device us, host_us: median host enqueue us, short: cushion too short,
        samples}; ``prep(i)`` (untimed) readies iteration i, ``call(i)`` runs it."""
        times, hosts = [], []
        for i in range(self.warm + self.iters):
            prep(i)
            if SMOKE:
                t = time.perf_counter()
                call(i)
                times.append((time.perf_counter() - t) * 1e6)
                hosts.append(times[-1])
                continue
            self.flush_buf.fill_(i & 0xFF)
            torch.cuda._sleep(self.cycles)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            t = time.perf_counter()
            start.record()
            call(i)
            end.record()
            host = (time.perf_counter() - t) * 1e6
            end.synchronize()
            if i >= self.warm:
                times.append(start.elapsed_time(end) * 1e3)
                hosts.append(host)
        host = statistics.median(hosts)
        return {"us": statistics.median(times), "host_us": host,
                "short": (not SMOKE) and host > 0.8 * self.cushion_us, "samples": times}


# ------------------------------------------------------------------------------------ inputs
BUILTIN = get_definition("indexer")


def workload(batch, pages):
    return Workload(uuid=f"envelope-b{batch}-p{pages}",
                    axes={"batch_size": batch, "max_num_pages": pages, "num_pages": batch * pages},
                    inputs={n: RandomInput() for n in BUILTIN.definition.inputs})


def small_draw(batch, pages, gen):
    """Fresh q, weights, seq_lens and block table with the definition's input helpers (as
    make_inputs draws them; the K cache stays)."""
    d = BUILTIN.definition
    wl = workload(batch, pages)
    return {"q_index_fp8": random_tensor(d.shape_of("q_index_fp8", wl.axes), torch_dtype("float8_e4m3fn"), gen, DEV),
            "weights": random_tensor((batch, 64), torch.float32, gen, DEV),
            "seq_lens": synth_seq_lens(batch, pages, PS, gen, DEV),
            "block_table": synth_block_table(batch, pages, batch * pages, gen, DEV)}


class Case:
    """Two buffer sets of one shape (the K cache shared: it is far larger than the L2, which is
    flushed anyway) and a pool of small-input draws copied in before every iteration."""

    def __init__(self, batch, pages, seed):
        self.batch, self.pages = batch, pages
        base = BUILTIN.make_inputs(BUILTIN.definition, workload(batch, pages), make_generator(seed, DEV.type), DEV)
        self.sets = [base, dict(base)]
        self.sets[1].update({n: base[n].clone() for n in SMALL})
        gen = make_generator(seed + 1, DEV.type)
        self.pool = [{n: base[n].clone() for n in SMALL}] + [small_draw(batch, pages, gen) for _ in range(3)]
        self.outs = [torch.empty((batch, TOPK), dtype=torch.int32, device=DEV) for _ in range(2)]
        self.drawn = [0, 0]

    def load(self, s, j):
        for n in SMALL:
            self.sets[s][n].copy_(self.pool[j][n])
        self.outs[s].fill_(12345)
        self.drawn[s] = j

    def k_bytes(self, j):
        """K-cache bytes of the pages that draw j's rows touch (none when nothing is scored)."""
        if self.pages * PS <= TOPK:
            return 0
        seq = self.pool[j]["seq_lens"].clamp(0, self.pages * PS).to(torch.int64)
        return int(((seq + PS - 1) // PS).sum()) * PAGE_BYTES

    def check(self, s, out):
        expected = BUILTIN.reference(**self.sets[s])
        verdict = check_outputs(BUILTIN.checker, {"topk_indices": out}, {"topk_indices": expected},
                                BUILTIN.tolerance, self.sets[s])
        return "ok" if verdict.passed else f"FAIL {verdict.reason}: {verdict.detail}"


# ------------------------------------------------------------------------------------ kernels
PATH_OF = {"long": "long_rows", "short": "short_rows"}     # kernel label -> kernel.FORCE_PATH


def shipped_label(batch, pages):
    """The label of the kernel the shipped dispatch runs at this shape ("all-sel": neither path)."""
    path = SHIPPED.path_for(pages, PS, TOPK)
    return {"long_rows": "long", "short_rows": "short"}.get(path, "all-sel")


def load_old(args):
    """The module in ``--old-kernel FILE`` (a single-file kernel); (None, reason) when it fails."""
    try:
        spec = importlib.util.spec_from_file_location("indexer_old_kernel", args.old_kernel)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


def load_recipe():
    try:
        from types import SimpleNamespace

        from kernelwright.baselines import get_baseline

        loaded = get_baseline("indexer_deepgemm_flashinfer_premeta").load()
        loaded.module._deep_gemm()
        loaded.module._top_k_page_table_transform()
        return SimpleNamespace(prepare=loaded.prepare, run=loaded.run), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


class DpsKernel:
    """A destination-passing solution module: run(**inputs, topk_indices=out); ``path``: the
    shipped solution's kernel.FORCE_PATH during the call (its launch cache keys on it)."""

    def __init__(self, mod, path=None):
        self.mod, self.path = mod, path

    def call(self, case, s):
        if self.path is None:
            self.mod.run(**case.sets[s], topk_indices=case.outs[s])
            return case.outs[s]
        saved, self.mod.FORCE_PATH = self.mod.FORCE_PATH, self.path
        try:
            self.mod.run(**case.sets[s], topk_indices=case.outs[s])
        finally:
            self.mod.FORCE_PATH = saved
        return case.outs[s]

    def after_load(self, case, s):
        pass

    def graph_refresh(self, case):
        pass


class RecipeKernel:
    """The recipe baseline: prepare (untimed, after every new draw) then run -> a new tensor."""

    def __init__(self, mod):
        self.mod = mod
        self.state = [None, None]
        self.captured_state = None
        self.result = [None, None]

    def after_load(self, case, s):
        self.state[s] = self.mod.prepare(**case.sets[s])

    def graph_refresh(self, case):
        # the captured graph reads the tensors of the state it was captured with
        for k, v in self.state[0].items():
            if isinstance(v, torch.Tensor) and self.captured_state[k].data_ptr() != v.data_ptr():
                self.captured_state[k].copy_(v)

    def call(self, case, s):
        self.result[s] = self.mod.run(**case.sets[s], state=self.state[s])
        return self.result[s]


def measure_kernel(clock, case, kern, with_graph=True):
    """Device time (eager, and graph replay), host enqueue time and the gate checks of one
    kernel on one shape."""
    row = {}

    def prep(i):
        s, j = i % 2, i % len(case.pool)
        case.load(s, j)
        kern.after_load(case, s)

    eager = clock.measure(lambda i: kern.call(case, i % 2), prep)
    row.update(us=eager["us"], host_us=eager["host_us"], cushion_short=eager["short"])
    row["check"] = [case.check(s, kern.call(case, s) if isinstance(kern, RecipeKernel) else case.outs[s])
                    for s in (0, 1)]
    row["k_bytes"] = statistics.median(case.k_bytes(j) for j in range(len(case.pool)))
    if with_graph and not SMOKE:
        try:
            row.update(graph_replay(clock, case, kern))
        except Exception as exc:
            row["graph_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return row


def graph_replay(clock, case, kern):
    case.load(0, 0)
    kern.after_load(case, 0)
    kern.call(case, 0)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kern.call(case, 0)
    if isinstance(kern, RecipeKernel):
        kern.captured_state = dict(kern.state[0])

    def prep(i):
        case.load(0, i % len(case.pool))
        kern.after_load(case, 0)
        kern.graph_refresh(case)

    res = clock.measure(lambda i: graph.replay(), prep)
    torch.cuda.synchronize()
    check = case.check(0, out)
    del graph
    return {"graph_us": res["us"], "graph_check": check}


@contextlib.contextmanager
def overrides(mod, values):
    """Module constants of ``mod`` (a path module or the solution's kernel module) set to
    ``values`` for the block; the solution's launch cache is emptied before and after."""
    saved = {k: getattr(mod, k) for k in values}
    for k, v in values.items():
        setattr(mod, k, v)
    SHIPPED._entries.clear()
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(mod, k, v)
        SHIPPED._entries.clear()


def empty_inputs(batch, pages):
    """Uninitialised tensors of one shape (what a compile needs: shapes, dtypes, strides and
    alignment, the same as the real inputs')."""
    d = BUILTIN.definition
    axes = workload(batch, pages).axes
    return {"q_index_fp8": torch.empty(d.shape_of("q_index_fp8", axes), dtype=torch.float8_e4m3fn, device=DEV),
            "k_index_cache_fp8": torch.empty((batch * pages, PS, 1, 132), dtype=torch.int8, device=DEV),
            "weights": torch.empty((batch, 64), dtype=torch.float32, device=DEV),
            "seq_lens": torch.empty(batch, dtype=torch.int32, device=DEV),
            "block_table": torch.empty((batch, pages), dtype=torch.int32, device=DEV)}


def precompile(shapes, paths, old, sweep):
    """Compile the launches of every shape with a ``_launch(..., warmup=True)``: the solution's
    ``paths`` (FORCE_PATH values), the long-row path's sweep variants and the ``old`` module when
    given, in parallel threads."""
    t = time.time()
    n = 0
    with ThreadPoolExecutor(16) as pool, triton.AsyncCompileMode(pool, ignore_errors=True):
        for batch, pages in shapes:
            inputs = empty_inputs(batch, pages)
            out = torch.empty((batch, TOPK), dtype=torch.int32, device=DEV)
            jobs = [(SHIPPED, {"FORCE_PATH": path}) for path in paths]
            if "long_rows" in paths and sweep and (batch, pages) in SWEEP_SHAPES:
                jobs += [(LONG, dict(v)) for _, v in SWEEP]
            if old is not None:
                jobs.append((old, {}))
            for mod, values in jobs:
                force = {"FORCE_PATH": "long_rows"} if mod is LONG else {}
                with overrides(SHIPPED, force), overrides(mod, values):
                    try:
                        mod._launch(**inputs, topk_indices=out, warmup=True)
                        n += 1
                    except Exception as exc:
                        print(f"precompile {batch}x{pages} {values}: {exc}", flush=True)
            del inputs
    print(f"precompiled {n} launch sets in {time.time() - t:.1f} s", flush=True)


# ------------------------------------------------------------------------------------ report
def plan_label(kernel, batch, pages):
    """The launch plan of the long or short path at this shape."""
    if pages * PS <= TOPK:
        return "all-selected"
    if kernel == "short":
        return SHORT._schedule(batch, triton.next_power_of_2(pages * PS))
    plan = LONG._plan(batch, pages, PS, LONG._num_sms(DEV))
    return f"{'1L' if plan.one_launch else '2L'} ppi{plan.pages_per_item} s{plan.stripes}"


def fmt(x, spec="7.1f"):
    return format(x, spec) if isinstance(x, (int, float)) else f"{'-':>7}"


def table(rows):
    by_shape = {}
    for r in rows:
        if r.get("kind") == "shape":
            by_shape.setdefault(r["shape"], {})[r["kernel"]] = r
    print("\n=== DSA indexer, device time (us; graph = the call replayed from a CUDA graph) ===")
    print("shipped: the path the solution's dispatch takes; graph, MB, TB/s: of the shipped path")
    print(f"{'shape':>12} {'shipped':>7} {'long plan':>13} {'long':>7} {'short':>7} {'graph':>7} {'MB':>7} "
          f"{'TB/s':>5} {'floor':>6} {'target':>6} {'old':>7} {'recipe':>7} {'x rec':>5} {'s/l':>5}  check")
    for shape, ks in by_shape.items():
        first = next(iter(ks.values()))
        label = first.get("shipped", "long")
        long, short, old, rec = (ks.get(k, {}) for k in ("long", "short", "old", "recipe"))
        ship = short if label == "short" else long
        us = lambda r: r.get("us") if isinstance(r.get("us"), float) else None
        kb = ship.get("k_bytes", 0)
        floor = kb / (HBM_TBPS * 1e6) if kb else None
        target = 2 * floor + 5 if floor and first.get("context", 0) >= 32768 else None
        tbps = kb / (us(ship) * 1e6) if kb and us(ship) else None
        xr = us(rec) / us(ship) if us(rec) and us(ship) else None
        sl = us(short) / us(long) if us(short) and us(long) else None
        checks = []
        for name, r in (("long", long), ("short", short), ("old", old), ("rec", rec)):
            c = r.get("error") or ",".join(r.get("check", []) + ([r["graph_check"]] if "graph_check" in r else []))
            if c and any(not x.startswith("ok") for x in c.split(",")):
                checks.append(f"{name}: {c[:90]}")
            if r.get("cushion_short"):
                checks.append(f"{name}: cushion short (host {r['host_us']:.0f} us)")
        print(f"{shape:>12} {label:>7} {long.get('plan', ''):>13} {fmt(us(long))} {fmt(us(short))} "
              f"{fmt(ship.get('graph_us'))} {fmt(kb / 1e6 if kb else None)} {fmt(tbps, '5.2f') if tbps else '    -'} "
              f"{fmt(floor, '6.1f') if floor else '     -'} {fmt(target, '6.1f') if target else '     -'} "
              f"{fmt(us(old))} {fmt(us(rec))} {fmt(xr, '5.2f') if xr else '    -'} "
              f"{fmt(sl, '5.2f') if sl else '    -'}  {'; '.join(checks) or 'ok'}")
    sweep = [r for r in rows if r.get("kind") == "sweep"]
    if sweep:
        print("\n=== sweep of the long-row path's plan constants (device us; default first) ===")
        for r in sweep:
            print(f"{r['shape']:>12} {r['variant']:<18} {fmt(r.get('us'))}  {r.get('error') or ','.join(r.get('check', []))}")


# ------------------------------------------------------------------------------------ main
def main():
    global DEV, SMOKE, SWEEP_SHAPES
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/indexer-envelope")
    ap.add_argument("--old-kernel", default=None, help="a single-file kernel module measured as one more row (old)")
    ap.add_argument("--shipped-only", action="store_true",
                    help="only the path the shipped dispatch takes at each shape, not both")
    ap.add_argument("--budget", type=float, default=280.0, help="seconds")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--cushion-us", type=float, default=200.0)
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="CPU plumbing check (interpreter, two tiny shapes)")
    args = ap.parse_args()
    t0 = time.time()
    left = lambda: args.budget - (time.time() - t0)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    envelope = [(b, c // PS) for c in CONTEXTS for b in BATCHES]
    shapes = list(KEY_SHAPES) + list(CONTEST) + [s for s in envelope if s not in KEY_SHAPES]
    if args.smoke:
        DEV, SMOKE = torch.device("cpu"), True
        shapes = [(2, 20), (2, 40)]
        SWEEP_SHAPES = ((2, 40),)
        args.iters = 1
    clock = Clock(args.cushion_us, args.iters, warm=1 if SMOKE else 3)
    info = {"device": torch.cuda.get_device_name() if DEV.type == "cuda" else "cpu",
            "torch": torch.__version__, "triton": triton.__version__,
            "method": "L2 flush (256 MB write), sleep cushion, start event, call, end event; median",
            "cushion_us": clock.cushion_us, "sleep_cycles_per_us": clock.cycles_per_us,
            "iters": args.iters}
    print(json.dumps(info), flush=True)
    old_mod, old_reason = load_old(args) if args.old_kernel else (None, None)
    recipe_mod, recipe_reason = (None, "smoke run") if SMOKE else load_recipe()
    for name, reason in (("old", old_reason), ("recipe", recipe_reason)):
        if reason:
            print(f"skipped {name}: {reason}", flush=True)
    info["skipped"] = {"old": old_reason, "recipe": recipe_reason}
    info["long_row_min_pages"] = SHIPPED.LONG_ROW_MIN_PAGES
    paths = {name: DpsKernel(SHIPPED, path) for name, path in PATH_OF.items()}
    others = []
    if old_mod is not None:
        others.append(("old", DpsKernel(old_mod)))
    if recipe_mod is not None:
        others.append(("recipe", RecipeKernel(recipe_mod)))

    def kernels_at(batch, pages):
        """(name, kernel) to measure at a shape: the shipped path first, then the other one."""
        first = shipped_label(batch, pages)
        first = first if first in paths else "short"       # all selected: both paths alike
        order = [first] + ([] if args.shipped_only else [n for n in paths if n != first])
        return first, [(n, paths[n]) for n in order] + others

    rows = []

    def save():
        (out_dir / "envelope.json").write_text(json.dumps({"info": info, "rows": rows}, indent=1))

    def record(row, fn):
        try:
            row.update(fn())
        except Exception as exc:  # keep going: report the failure
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            traceback.print_exc(limit=4)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "samples"}), flush=True)
        save()

    if not SMOKE:
        try:
            precompile(shapes, list(PATH_OF.values()), old_mod, sweep=not args.no_sweep)
        except Exception as exc:
            print(f"precompile failed: {exc}", flush=True)
        torch.cuda.empty_cache()
    signal.signal(signal.SIGTERM, lambda *_: (table(rows), sys.exit(124)))   # an outer timeout
    for batch, pages in shapes:
        ctx = pages * PS
        shape = f"{batch}x{ctx // 1024}K" if ctx >= 4096 and ctx % 1024 == 0 else f"{batch}x{pages}p"
        if left() < 20:
            print(f"{shape}: skipped (budget)", flush=True)
            rows.append({"kind": "shape", "shape": shape, "kernel": "long", "error": "skipped (budget)"})
            continue
        try:
            case = Case(batch, pages, seed=1000 + batch * 7 + pages)
        except Exception as exc:
            rows.append({"kind": "shape", "shape": shape, "kernel": "long", "error": f"inputs: {exc}"})
            print(f"{shape}: inputs failed: {exc}", flush=True)
            continue
        first, kernels = kernels_at(batch, pages)
        for name, kern in kernels:
            if name != first and left() < 60:
                print(f"{shape} {name}: skipped (budget)", flush=True)
                continue
            row = {"kind": "shape", "shape": shape, "kernel": name, "batch": batch, "pages": pages,
                   "context": pages * PS, "shipped": shipped_label(batch, pages),
                   "plan": plan_label(name, batch, pages) if name in paths else ""}
            record(row, lambda: measure_kernel(clock, case, kern))
        if not args.no_sweep and (batch, pages) in SWEEP_SHAPES and pages * PS > TOPK:
            for label, values in (("default", {}),) + SWEEP:
                if left() < 90:
                    break
                with overrides(LONG, values):
                    record({"kind": "sweep", "shape": shape, "variant": label, "plan": plan_label("long", batch, pages)},
                           lambda: {k: v for k, v in measure_kernel(clock, case, paths["long"], with_graph=False).items()
                                    if k in ("us", "check", "host_us")})
        del case
        if DEV.type == "cuda":
            torch.cuda.empty_cache()
    info["wall_s"] = time.time() - t0
    save()
    table(rows)


if __name__ == "__main__":
    sys.exit(main())
