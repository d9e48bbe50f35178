"""DSA sparse attention over the serving envelope on one CUDA device: correctness and device time
of the working tree's kernel, main's shipped kernel and the library baselines.

    PYTHONPATH=src python experiments/attention_envelope.py --out $OUT [--main-kernel FILE]
        [--budget 270] [--no-sweep] [--smoke]

Cases (``dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64``, 16 heads, topk 2048), inputs
from the definition's ``make_inputs``:
  * envelope: the definition's serving envelope (``sweep_workloads``: the last T positions of
    ONE request of context 4K / 32K / 128K tokens, pages scattered in a cache of twice the
    request's pages, rows overlapping; plus a 1K context, rows short of topk, -1 padded),
    completed to T = 1, 2, 3, 4, 6, 8, 16, 32, 64, 128 at every context;
  * contest: each row its own request: the contest workloads for T <= 8, 8462 pages beyond.

Variants: ``new`` (the v3 candidate ``kernelwright.solutions.candidates.dsa_attention_triton_v3``),
``main`` (the shipped ``kernelwright.solutions.dsa_attention_triton``, or ``--main-kernel FILE``), ``fa3`` (FlashInfer MLA fa3, plan untimed) and ``flashmla``
(FlashMLA sparse prefill), each skipped with a printed reason when it does not import; then,
budget permitting, a few alternative configs of ``new`` (``sweep`` rows).

Every variant is checked with the gate's checker (``check_outputs`` kind "attention", the
definition's tolerance) against the definition's reference on two buffer sets and on the graph
replay.  Timing, per iteration on one of two buffer sets whose small inputs (q_nope, q_pe,
sparse_indices) get a new draw from a pool of 4 and whose outputs are poisoned: flush the L2
(write 256 MB), queue ``torch.cuda._sleep`` (~250 us of GPU work), record the start event,
make the call, record the end event; the median of ``--iters`` (>= 20).  ``dev`` is the call
itself behind that cushion (its host time hidden; ``host`` reports it, and a row whose host time
exceeds the cushion is flagged), ``graph`` the call captured once in a CUDA graph by the caller
and replayed behind the same cushion.  TB/s = unique valid KV rows x 1152 B / dev.

Writes ``attention_envelope.json`` (one row per case and variant) and ``attention_envelope.log``
under --out; prints one line per row as it goes and a table at the end.
"""

from __future__ import annotations

import os
import sys

if "--smoke" in sys.argv:  # the Triton interpreter must be chosen before triton is imported
    os.environ.setdefault("TRITON_INTERPRET", "1")

import argparse
import importlib.util
import json
import statistics
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch

from kernelwright.definitions import get as get_definition
from kernelwright.definitions.base import context_of
from kernelwright.gate.checkers import check_outputs
from kernelwright.inputs import make_generator
from kernelwright.trace import Workload

HEADS, D_CKV, D_KPE, PAGE, TOPK = 16, 512, 64, 64, 2048
KV_ROW_BYTES = (D_CKV + D_KPE) * 2
HBM_TBPS = 4.27
ENVELOPE_T = [1, 2, 3, 4, 6, 8, 16, 32, 64, 128]
CONTEST_PAGES = 8462        # the contest's largest cache
FLUSH_BYTES = 256 << 20
SLEEP_CYCLES = 500_000      # ~250 us at the H200's ~1.98 GHz
POOL = 4
REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------ inputs
class Case:
    """One workload: the KV caches of its first draw, a pool of draws of the small inputs with
    their reference outputs, two buffer sets whose small inputs are refreshed from the pool,
    and their (poisoned) outputs."""

    SMALL = ("q_nope", "q_pe", "sparse_indices")

    def __init__(self, builtin, workload: Workload, seed: int, device):
        axes = builtin.definition.axis_values(workload.axes)
        self.tokens = axes["num_tokens"]
        self.context = context_of(workload.uuid)
        self.kind = "contest" if self.context is None else ("short" if self.context < axes["topk"] else "envelope")
        self.label = "contest" if self.context is None else (
            f"ctx{self.context // 1024}K" if self.context % 1024 == 0 else f"ctx{self.context}")
        self.pool, self.caches, self.sm_scale = [], None, None
        for j in range(POOL):
            draw = builtin.make_inputs(builtin.definition, workload, make_generator(seed * 10 + j, device), device)
            self.pool.append({n: draw[n] for n in self.SMALL})
            if self.caches is None:  # draw 0's caches serve every draw (same shapes: its ids stay valid)
                self.caches = {n: draw[n] for n in ("ckv_cache", "kpe_cache")}
                self.sm_scale = draw["sm_scale"]
            del draw
        self.expected = [builtin.reference(**self.inputs_of(d)) for d in self.pool]
        self.sets = [{n: self.pool[0][n].clone() for n in self.SMALL} for _ in range(2)]
        self.outs = [(torch.empty((self.tokens, HEADS, D_CKV), dtype=torch.bfloat16, device=device),
                      torch.empty((self.tokens, HEADS), dtype=torch.float32, device=device))
                     for _ in range(2)]
        self.draw_of = [0, 0]
        idx = self.pool[0]["sparse_indices"]
        self.unique_bytes = float(torch.unique(idx[idx >= 0]).numel()) * KV_ROW_BYTES
        self.valid_per_row = float((idx >= 0).sum()) / max(self.tokens, 1)

    def inputs_of(self, small):
        return dict(q_nope=small["q_nope"], q_pe=small["q_pe"], ckv_cache=self.caches["ckv_cache"],
                    kpe_cache=self.caches["kpe_cache"], sparse_indices=small["sparse_indices"],
                    sm_scale=self.sm_scale)

    def inputs(self, s):
        return self.inputs_of(self.sets[s])

    def refresh(self, s, j):
        for n in self.SMALL:
            self.sets[s][n].copy_(self.pool[j % POOL][n])
        self.outs[s][0].fill_(float("nan"))
        self.outs[s][1].fill_(float("nan"))
        self.draw_of[s] = j % POOL

    def check(self, s, tolerance) -> str:
        out, lse = self.outs[s]
        ref_out, ref_lse = self.expected[self.draw_of[s]]
        res = check_outputs("attention", {"output": out, "lse": lse},
                            {"output": ref_out, "lse": ref_lse}, tolerance, self.inputs(s))
        return "ok" if res.passed else f"{res.reason}: {res.detail}"


def workloads(builtin, sweep: List[Workload]) -> List[Workload]:
    """The serving envelope ``sweep`` (one request's T rows, its context in the uuid: the
    definition's ``sweep_workloads``) completed to ENVELOPE_T at every context of at least
    topk tokens, then contest-style rows: the contest workloads for T <= 8, CONTEST_PAGES pages
    for larger T."""
    template = dict((sweep or builtin.public_workloads())[0].inputs)
    have = {(w.axes["num_tokens"], context_of(w.uuid)) for w in sweep}
    contexts = sorted({c for _, c in have if c is not None and c >= TOPK})
    extra = [Workload(uuid=f"envelope-att-t{t}-ctx{c}", axes={"num_tokens": t, "num_pages": 2 * -(-c // PAGE)},
                      inputs=template)
             for c in contexts for t in ENVELOPE_T if (t, c) not in have]
    out = sorted(sweep + extra, key=lambda w: (context_of(w.uuid), w.axes["num_tokens"]))
    public = builtin.public_workloads()
    for t in ENVELOPE_T:
        first = next((w for w in public if w.axes["num_tokens"] == t), None)
        out.append(first or Workload(uuid=f"contest-style-t{t}", axes={"num_tokens": t, "num_pages": CONTEST_PAGES},
                                     inputs=dict(public[0].inputs)))
    return out


# ------------------------------------------------------------------------------------ timing
class Timer:
    def __init__(self, device, iters, warm, smoke):
        self.iters, self.warm, self.smoke = iters, warm, smoke
        self.flush = None if smoke else torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)
        self.cushion_us = None

    def calibrate(self):
        if self.smoke:
            return
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(SLEEP_CYCLES)
        b.record()
        torch.cuda.synchronize()
        self.cushion_us = a.elapsed_time(b) * 1e3

    def measure(self, call: Callable[[int], None], prep: Callable[[int], None]):
        """(median device us, median host us of the call) over the timed iterations."""
        if self.smoke:
            prep(0)
            call(0)
            return 0.0, 0.0
        dev, host = [], []
        for i in range(self.warm + self.iters):
            prep(i)
            self.flush.fill_(i & 0xFF)
            torch.cuda._sleep(SLEEP_CYCLES)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            h0 = time.perf_counter()
            call(i)
            h1 = time.perf_counter()
            end.record()
            torch.cuda.synchronize()
            if i >= self.warm:
                dev.append(start.elapsed_time(end) * 1e3)
                host.append((h1 - h0) * 1e6)
        return statistics.median(dev), statistics.median(host)


# ------------------------------------------------------------------------------------ variants
class Variant:
    """A callable under test: ``bind(case, s)`` returns the call on buffer set s, and
    ``prepare(case, s)`` does its untimed per-content work (FlashInfer's plan)."""

    def __init__(self, name, call, prepare_case=None, replan=None):
        self.name = name
        self._call = call
        self._prepare_case = prepare_case
        self._replan = replan
        self.state = {}

    def setup(self, case):
        self.state = {}
        if self._prepare_case is not None:
            self.state = {s: self._prepare_case(case, s) for s in (0, 1)}

    def replan(self, case, s):
        if self._replan is not None:
            self._replan(case, s, self.state[s])

    def call(self, case, s):
        out, lse = case.outs[s]
        self._call(case.inputs(s), out, lse, self.state.get(s))


def solution_variant(name, module, config=None):
    if config is None:
        return Variant(name, lambda inp, out, lse, st: module.run(**inp, output=out, lse=lse))
    return Variant(name, lambda inp, out, lse, st: module._launch(**inp, output=out, lse=lse, config=config))


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main_kernel(path_arg: Optional[str]):
    """(module, None) for the shipped kernel (or the one in ``--main-kernel FILE``), or (None, reason)."""
    try:
        if path_arg:
            return load_module("attn_main_kernel", Path(path_arg)), None
        from kernelwright.solutions.dsa_attention_triton import kernel as shipped

        return shipped, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


def baseline_variants(definition_name):
    """[(Variant or None, reason)] for the FlashInfer fa3 (plan untimed) and FlashMLA baselines."""
    from kernelwright.baselines import all_baselines

    found = {b.key: b for b in all_baselines(definition_name)}
    result = []
    for key, name in (("attention_flashinfer_mla_fa3_preplanned", "fa3"),
                      ("attention_flashmla_sparse", "flashmla")):
        entry = found.get(key)
        if entry is None:
            result.append((None, f"{name}: baseline {key} not registered"))
            continue
        reason = entry.availability()
        if reason:
            result.append((None, f"{name}: {reason}"))
            continue
        try:
            loaded = entry.load()
            mod = loaded.module
        except Exception as exc:
            result.append((None, f"{name}: import failed: {type(exc).__name__}: {exc}"))
            continue
        if name == "fa3":
            def prepare_case(case, s, mod=mod):
                return {"wrapper": mod.make_wrapper(case.caches["ckv_cache"].device)}

            def replan(case, s, state, mod=mod):
                inp = case.inputs(s)
                mod.plan(state["wrapper"], inp["sparse_indices"], HEADS, D_CKV, D_KPE,
                         inp["sm_scale"], inp["q_nope"].dtype)
        else:
            def prepare_case(case, s, prepare=loaded.prepare):
                return prepare(**case.inputs(s))
            replan = None
        result.append((Variant(name, lambda inp, out, lse, st, run=loaded.run: run(**inp, output=out, lse=lse, state=st),
                               prepare_case, replan), None))
    return result


# ------------------------------------------------------------------------------------ runner
class Runner:
    def __init__(self, args, builtin, timer):
        self.args, self.builtin, self.timer = args, builtin, timer
        self.t0 = time.time()
        self.rows: List[Dict[str, Any]] = []
        self.log = open(Path(args.out) / "attention_envelope.log", "a")

    def left(self):
        return self.args.budget - (time.time() - self.t0)

    def emit(self, row):
        self.rows.append(row)
        line = json.dumps(row)
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()
        (Path(self.args.out) / "attention_envelope.json").write_text(json.dumps(self.rows, indent=1))

    def measure(self, case: Case, variant: Variant) -> Dict[str, Any]:
        tol = self.builtin.tolerance
        variant.setup(case)

        def prep(i):
            s = i % 2
            case.refresh(s, i)
            variant.replan(case, s)

        res: Dict[str, Any] = {}
        t = time.time()
        for s in (0, 1):  # first calls (compile, capture) and the check on both sets
            prep(s)
            variant.call(case, s)
        if case.tokens and not self.timer.smoke:
            torch.cuda.synchronize()
        res["first_calls_s"] = round(time.time() - t, 2)
        res["check"] = [case.check(s, tol) for s in (0, 1)]
        res["dev_us"], res["host_us"] = self.timer.measure(lambda i: variant.call(case, i % 2), prep)
        if self.timer.cushion_us is not None and res["host_us"] > 0.9 * self.timer.cushion_us:
            res["flag"] = "host time exceeds the cushion: dev_us includes host time"
        res["check"].append(case.check(1, tol))
        res.update(self.graph(case, variant, prep))
        return res

    def graph(self, case, variant, prep):
        """The call captured in a CUDA graph on buffer set 0, replayed on new contents."""
        if self.timer.smoke:
            return {}
        try:
            prep(0)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                variant.call(case, 0)
            def prep0(i):  # set 0, the next draw each iteration
                case.refresh(0, i)
                variant.replan(case, 0)
            dev, _ = self.timer.measure(lambda i: g.replay(), prep0)
            out = {"graph_us": dev, "graph_check": case.check(0, self.builtin.tolerance)}
            del g
            return out
        except Exception as exc:
            torch.cuda.synchronize()
            return {"graph_error": f"{type(exc).__name__}: {str(exc)[:200]}"}

    def record(self, case: Case, variant: Variant, extra=None):
        row = {"case": case.label, "kind": case.kind, "T": case.tokens, "L": case.context,
               "variant": variant.name, "unique_MB": round(case.unique_bytes / 1e6, 3),
               "valid_per_row": round(case.valid_per_row, 1), **(extra or {})}
        try:
            row.update(self.measure(case, variant))
            if row.get("dev_us"):
                row["TBps"] = round(case.unique_bytes / (row["dev_us"] * 1e-6) / 1e12, 3)
        except Exception as exc:  # one failing case: print it, keep going
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            traceback.print_exc(limit=4)
            if not self.timer.smoke:
                torch.cuda.synchronize()
        self.emit(row)


def precompile(module, cases, configs):
    """Compile the launches of ``module`` for every case (and config) in parallel."""
    import triton

    t = time.time()
    with ThreadPoolExecutor(16) as pool, triton.AsyncCompileMode(pool, ignore_errors=True):
        for case in cases:
            for cfg in configs(case):
                kw = {} if cfg is None else {"config": cfg}
                try:
                    module._launch(**case.inputs(0), output=case.outs[0][0], lse=case.outs[0][1],
                                   warmup=True, **kw)
                except Exception as exc:
                    print(f"precompile {getattr(module, '__name__', module)} T={case.tokens} {cfg}: {exc}")
    print(f"precompiled {getattr(module, '__name__', '')} in {time.time() - t:.1f} s", flush=True)


def filling(K, tokens, block_n, num_warps, num_stages, swap_ab, programs=132):
    """The config of ``block_n``-slot tiles whose splits make tokens * splits ~ ``programs``."""
    tiles = -(-TOPK // block_n)
    per_split = -(-tiles // min(tiles, max(1, programs // tokens)))
    if not swap_ab:
        num_stages = max(2, min(num_stages, per_split))
    return K.Config(block_n, per_split, num_warps, num_stages, swap_ab)


def sweep_configs(K, tokens):
    """Alternative configs of the new kernel around its dispatch at ``tokens``: other tile
    sizes and orientations, warps, pipeline depths, two programs per SM, the id sort toggled."""
    base = K._choose_config(tokens, TOPK)
    if tokens <= 8:
        alts = [filling(K, tokens, 16, 4, 4, False), filling(K, tokens, 32, 4, 3, False),
                filling(K, tokens, 64, 4, 2, True), filling(K, tokens, 64, 8, 2, True),
                filling(K, tokens, 16, 4, 4, False, programs=264)]
        return [c for c in alts if c != base][:4]
    return [base._replace(sort_indices=not base.sort_indices), base._replace(num_warps=8),
            filling(K, tokens, 32, 4, 3, False),
            base._replace(tiles_per_split=max(1, base.tiles_per_split // 2))]


def table(rows, out_dir):
    by_case: Dict[tuple, Dict[str, Dict[str, Any]]] = {}
    for r in rows:
        if r.get("variant", "").startswith("sweep"):
            continue
        by_case.setdefault((r["kind"], r["case"], r["T"]), {})[r["variant"]] = r
    lines = ["", "=== DSA attention, device time in us (dev: call behind a ~250 us cushion, L2 flushed; "
             "graph: caller's graph replay); TB/s on unique KV bytes; x = best baseline / new ==="]
    head = f"{'kind':<8} {'case':<8} {'T':>4} {'uMB':>7} | {'new':>7} {'graph':>7} {'TB/s':>5} | " \
           f"{'main':>7} {'fa3':>7} {'flashmla':>8} | {'x best':>6} {'x main':>6} | check"
    lines.append(head)
    ratios = {}
    for (kind, label, tokens), vs in sorted(by_case.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        def us(name, key="dev_us"):
            r = vs.get(name)
            ok = r is not None and not r.get("error") and all(c == "ok" for c in r.get("check", []))
            return r[key] if ok and r.get(key) else None
        new = us("new")
        base = [x for x in (us("fa3"), us("flashmla")) if x]
        best = min(base) if base else None
        x_best = best / new if best and new else None
        x_main = us("main") / new if us("main") and new else None
        if x_best:
            ratios.setdefault(kind, []).append((tokens, x_best, new))
        fmt = lambda v, w=7: f"{v:{w}.1f}" if isinstance(v, float) else f"{'-':>{w}}"
        checks = [c for v in vs.values() for c in (v.get("check", []) + ([v["graph_check"]] if "graph_check" in v else []))]
        errs = [f"{k}: {v['error'][:60]}" for k, v in vs.items() if v.get("error")]
        bad = [c for c in checks if c != "ok"]
        status = "ok" if not bad and not errs else "; ".join(errs + bad[:2])[:120]
        nr = vs.get("new", {})
        lines.append(f"{kind:<8} {label:<8} {tokens:>4} {nr.get('unique_MB', 0):7.1f} | {fmt(new)} "
                     f"{fmt(nr.get('graph_us'))} {nr.get('TBps', 0) or 0:5.2f} | {fmt(us('main'))} "
                     f"{fmt(us('fa3'))} {fmt(us('flashmla'), 8)} | {fmt(x_best, 6)} {fmt(x_main, 6)} | {status}")
    lines.append("")
    contest = [n for t, _, n in ratios.get("contest", []) if t <= 8]
    for kind, vals in sorted(ratios.items()):
        small = [x for t, x, _ in vals if t <= 8]
        large = [x for t, x, _ in vals if t >= 16]
        lines.append(f"{kind:<8} x best: mean T<=8 {statistics.mean(small) if small else float('nan'):.2f}, "
                     f"min T<=8 {min(small) if small else float('nan'):.2f}, "
                     f"min T>=16 {min(large) if large else float('nan'):.2f}")
    new_contest = [r["dev_us"] for r in rows if r.get("variant") == "new" and r["kind"] == "contest"
                   and r["T"] <= 8 and r.get("dev_us")]
    if new_contest:
        lines.append(f"contest T<=8 mean (new, dev) {statistics.mean(new_contest):.2f} us over {len(new_contest)} T")
    sweeps: Dict[tuple, List[str]] = {}
    for r in rows:
        if r.get("variant") == "sweep":
            ok = not r.get("error") and all(c == "ok" for c in r.get("check", ["?"]))
            dev = f"{r['dev_us']:.1f}" if r.get("dev_us") else "-"
            cfg = "/".join(str(int(x)) if not isinstance(x, bool) else "FT"[x] for x in r["config"])
            sweeps.setdefault((r["kind"], r["case"], r["T"]), []).append(f"{cfg} {dev}{'' if ok else ' BAD'}")
    if sweeps:
        lines.append("sweep: dev us of alternative configs (block_n/tiles_per_split/warps/stages/"
                     "swap_ab/sort) next to new's")
        for (kind, label, tokens), alts in sweeps.items():
            new = by_case.get((kind, label, tokens), {}).get("new", {}).get("dev_us")
            lines.append(f"  {kind:<8} {label:<8} T={tokens:<4} new {new or float('nan'):6.1f} | " + ", ".join(alts))
    text = "\n".join(lines)
    print(text)
    (Path(out_dir) / "attention_envelope_table.txt").write_text(text + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/attention-envelope")
    ap.add_argument("--main-kernel", default=None, help="main's kernel.py (default: git show main:...)")
    ap.add_argument("--budget", type=float, default=270.0, help="seconds; later cases are skipped past it")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="CPU plumbing check (interpreter, tiny sizes)")
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    global TOPK, ENVELOPE_T, CONTEST_PAGES
    if args.smoke:
        TOPK, ENVELOPE_T, CONTEST_PAGES = 64, [1, 16], 12
    from kernelwright.solutions.candidates.dsa_attention_triton_v3 import kernel as K

    device = torch.device("cpu" if args.smoke else "cuda")
    builtin = get_definition("attention__quick" if args.smoke else "attention")
    timer = Timer(device, args.iters, args.warm, args.smoke)
    timer.calibrate()
    r = Runner(args, builtin, timer)
    print(device, "" if args.smoke else torch.cuda.get_device_name(), "torch", torch.__version__,
          "cushion_us", timer.cushion_us, flush=True)

    main_mod, main_reason = main_kernel(args.main_kernel)
    variants = [solution_variant("new", K)]
    if main_mod is not None:
        variants.append(solution_variant("main", main_mod))
    else:
        print("skipped main:", main_reason, flush=True)
    if not args.smoke:
        for v, reason in baseline_variants(builtin.name):
            if v is None:
                print("skipped baseline", reason, flush=True)
            else:
                variants.append(v)

    cases = []
    chosen = workloads(builtin, get_definition("attention").sweep_workloads())
    if args.smoke:
        chosen = [w for w in chosen if w.axes["num_tokens"] in ENVELOPE_T
                  and (context_of(w.uuid) or 0) <= 4096][:5]
    for i, w in enumerate(chosen):
        try:
            cases.append(Case(builtin, w, 100 + i, device))
        except Exception as exc:
            print(f"case {w.uuid}: inputs failed: {type(exc).__name__}: {exc}", flush=True)
    print(f"{len(cases)} cases ready at {time.time() - r.t0:.1f} s", flush=True)
    if not args.smoke:
        precompile(K, cases, lambda c: [None])
        if main_mod is not None:
            precompile(main_mod, cases, lambda c: [None])

    for case in cases:
        for v in variants:
            if r.left() < 0:
                print(f"budget spent: skipped {case.kind} {case.label} T={case.tokens} {v.name}", flush=True)
                continue
            r.record(case, v)
    if not args.no_sweep:
        picks = [c for c in cases if (c.kind == "contest" and c.tokens <= 8)
                 or (c.kind == "envelope" and c.tokens >= 16 and c.context >= 32768)]
        if not args.smoke:
            precompile(K, picks, lambda c: sweep_configs(K, c.tokens))
        for case in picks:
            for cfg in sweep_configs(K, case.tokens):
                if r.left() < 0:
                    break
                r.record(case, solution_variant("sweep", K, cfg), {"config": list(cfg)})
    print(f"new kernel: USE_PDL={K.USE_PDL} (False: a graph capture with PDL failed)", flush=True)
    table(r.rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
