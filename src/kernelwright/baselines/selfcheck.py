"""Self-check of the baselines on a CUDA machine: does each available baseline run, is it correct
by the definition's rule, and how fast is it.  Meant as the first thing run on a fresh GPU
machine, to find API mistakes quickly; every failure is one diagnostic line and the run goes on.

    python -m kernelwright.baselines.selfcheck [--definition NAME ...] [--out DIR]
        [--baseline KEY ...] [--iters 20] [--warmup 5] [--seed 0] [--all-public] [--verbose]

Per definition: one or two small contest-like workloads (seeded ``make_inputs``), the reference
once, then per baseline ``prepare`` (when declared, untimed), one checked call, and a timing
(CUDA events around each call, median of --iters after --warmup; warm L2, host overhead
included).  ``lower_bound`` entries are timed only.  Attention also gets an edge case: one
token whose indices are all -1 (definition: output 0, lse -inf).

Comparison rules (flashinfer-bench ``compute_error_stats``): an element fails where
|x-y| > atol AND |x-y|/(|y|+1e-8) > rtol; an output passes when the matched ratio reaches the
definition's required ratio.  Indexer: each row must hold exactly min(2048, seq_len) distinct
valid ids of its own context and -1 after them, and the sorted scores of the selected ids must
match the reference's sorted scores (order and tie-breaking are free).

Writes ``DIR/baselines_selfcheck.json`` (all records, full tracebacks) when --out is given.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from kernelwright.baselines import BaselineEntry, all_baselines
from kernelwright.definitions import BuiltinDefinition, get
from kernelwright.trace import Workload, torch_dtype

DEFAULT_DEFINITIONS = ["indexer", "attention", "moe"]

# contest-like workloads picked from the public sets by their axes (first match wins)
PICKS = {
    "moe": [{"seq_len": 7}, {"seq_len": 901}],
    "indexer": [{"batch_size": 4, "max_num_pages": 19}, {"batch_size": 8, "max_num_pages": 45}],
    "attention": [{"num_tokens": 1}, {"num_tokens": 8}],
}


# --------------------------------------------------------------------------- small helpers
def one_line(exc: BaseException, limit: int = 400) -> str:
    text = " ".join(str(exc).split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        shape = "x".join(str(s) for s in value.shape) or "scalar"
        extra = "" if value.is_contiguous() else " non-contig"
        return f"[{shape}] {str(value.dtype).replace('torch.', '')}{extra}"
    return f"{type(value).__name__}={value!r}"


def describe_args(names: Sequence[str], values: Sequence[Any]) -> str:
    return ", ".join(f"{n} {describe(v)}" for n, v in zip(names, values))


def as_tuple(result: Any) -> Tuple[Any, ...]:
    if isinstance(result, (tuple, list)):
        return tuple(result)
    return (result,)


# --------------------------------------------------------------------------- comparisons
def elementwise(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> Dict[str, Any]:
    """Matched ratio under |x-y| > atol AND rel > rtol; equal infinities match, NaN never does."""
    if tuple(out.shape) != tuple(ref.shape):
        return {"matched_ratio": 0.0, "max_abs_err": float("inf"),
                "note": f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"}
    x = out.detach().float()
    y = ref.detach().float()
    same_inf = torch.isinf(x) & torch.isinf(y) & (torch.sign(x) == torch.sign(y))
    diff = (x - y).abs()
    diff = torch.where(same_inf, torch.zeros_like(diff), diff)
    rel = diff / (y.abs() + 1e-8)
    fail = ((diff > atol) & (rel > rtol)) | torch.isnan(diff)
    finite = torch.isfinite(diff)
    total = max(1, fail.numel())
    rec = {"matched_ratio": 1.0 - fail.sum().item() / total,
           "max_abs_err": diff[finite].max().item() if finite.any() else float("inf"),
           "nonfinite_mismatch": int((~finite & ~same_inf).sum().item())}
    if out.dtype != ref.dtype:
        rec["dtype"] = f"{out.dtype} vs reference {ref.dtype}"
    return rec


def lse_ratio(out: torch.Tensor, ref: torch.Tensor) -> Optional[float]:
    """Median of baseline/reference LSE over finite, non-tiny entries (ln 2 = 0.693 means the
    baseline returned a natural-log LSE where base 2 was wanted; 1.443 the reverse)."""
    x, y = out.float(), ref.float()
    keep = torch.isfinite(x) & torch.isfinite(y) & (y.abs() > 1e-3)
    if not keep.any():
        return None
    return (x[keep] / y[keep]).median().item()


def check_topk(inputs: Dict[str, Any], out: torch.Tensor, ref: torch.Tensor, atol: float,
               rtol: float) -> Dict[str, Any]:
    from kernelwright.definitions.dsa_indexer import reference

    q = inputs["q_index_fp8"].float()
    keys = reference.dequantize_k_cache(inputs["k_index_cache_fp8"]).reshape(-1, q.shape[-1])
    page = inputs["k_index_cache_fp8"].shape[1]
    seq_lens = inputs["seq_lens"].tolist()
    if out.dtype != torch.int32 or tuple(out.shape) != tuple(ref.shape):
        return {"matched_ratio": 0.0, "note": f"got {describe(out)}, want {describe(ref)}"}
    problems: List[str] = []
    worst = 0.0
    matched = 0
    for b, seq_len in enumerate(seq_lens):
        row = out[b]
        count = min(out.shape[1], seq_len)
        valid = row[row >= 0].long()
        tokens = reference.row_token_ids(inputs["block_table"][b], seq_len, page)
        if valid.numel() != count:
            problems.append(f"row {b}: {valid.numel()} valid ids, want {count} (seq_len {seq_len})")
            continue
        if (row[:count] < 0).any() or (row[count:] != -1).any():
            problems.append(f"row {b}: -1 padding not at the end (seq_len {seq_len})")
            continue
        if valid.unique().numel() != count:
            problems.append(f"row {b}: duplicate ids")
            continue
        if not torch.isin(valid, tokens).all():
            problems.append(f"row {b}: ids outside the row's context")
            continue
        if count == 0:
            matched += 1
            continue
        weights = inputs["weights"][b].float()
        got = reference.row_scores(q[b], keys, weights, valid).sort(descending=True).values
        want_ids = ref[b][ref[b] >= 0].long()
        want = reference.row_scores(q[b], keys, weights, want_ids).sort(descending=True).values
        rec = elementwise(got, want, atol, rtol)
        worst = max(worst, rec["max_abs_err"])
        if rec["matched_ratio"] < 1.0:
            problems.append(f"row {b}: sorted scores differ (max abs err {rec['max_abs_err']:.3g})")
            continue
        matched += 1
    res = {"matched_ratio": matched / max(1, len(seq_lens)), "max_abs_err": worst}
    if problems:
        res["note"] = "; ".join(problems[:4]) + (f"; +{len(problems) - 4} more" if len(problems) > 4 else "")
    return res


def compare(builtin: BuiltinDefinition, inputs: Dict[str, Any], outs: Tuple[Any, ...],
            refs: Tuple[Any, ...]) -> Dict[str, Any]:
    tol = builtin.tolerance
    names = builtin.definition.output_names
    if len(outs) != len(refs):
        return {"passed": False, "note": f"{len(outs)} outputs, want {len(refs)} ({names})"}
    if builtin.checker == "topk_indices":
        rec = check_topk(inputs, outs[0], refs[0], tol.atol, tol.rtol)
        rec["passed"] = rec["matched_ratio"] >= 1.0
        return rec
    per = {}
    passed = True
    for name, o, r in zip(names, outs, refs):
        if not isinstance(o, torch.Tensor):
            per[name] = {"matched_ratio": 0.0, "note": f"not a tensor: {describe(o)}"}
            passed = False
            continue
        rec = elementwise(o, r, tol.atol, tol.rtol)
        if name == "lse" and rec["matched_ratio"] < tol.required_matched_ratio:
            rec["lse_ratio_median"] = lse_ratio(o, r)
        per[name] = rec
        passed &= rec["matched_ratio"] >= tol.required_matched_ratio
    worst = min(per.values(), key=lambda r: r["matched_ratio"])
    return {"passed": passed, "matched_ratio": worst["matched_ratio"],
            "max_abs_err": max(r.get("max_abs_err", float("inf")) for r in per.values()),
            "outputs": per}


# --------------------------------------------------------------------------- running
def pick_workloads(builtin: BuiltinDefinition, all_public: bool) -> List[Workload]:
    public = builtin.public_workloads()
    if all_public:
        return public
    chosen = []
    for want in PICKS.get(builtin.short, []):
        match = next((w for w in public if all(w.axes.get(k) == v for k, v in want.items())), None)
        if match is not None and match not in chosen:
            chosen.append(match)
    return chosen or public[:1]


def make_outputs(builtin: BuiltinDefinition, workload: Workload, device) -> List[torch.Tensor]:
    d = builtin.definition
    return [torch.empty(d.shape_of(n, workload.axes), dtype=torch_dtype(d.outputs[n].dtype), device=device)
            for n in d.output_names]


def call(loaded, args, outputs, state):
    kwargs = {"state": state} if loaded.prepare is not None else {}
    if loaded.destination_passing_style:
        loaded.run(*args, *outputs, **kwargs)
        return tuple(outputs)
    return as_tuple(loaded.run(*args, **kwargs))


def time_call(fn, iters: int, warmup: int) -> Dict[str, float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    return {"median_us": times[len(times) // 2], "min_us": times[0], "max_us": times[-1]}


def run_entry(entry: BaselineEntry, builtin: BuiltinDefinition, workload: Workload,
              inputs: Dict[str, Any], refs: Tuple[Any, ...], args: argparse.Namespace,
              edge: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    rec: Dict[str, Any] = {"baseline": entry.key, "label": entry.label, "kind": entry.kind,
                           "workload": workload.uuid, "axes": dict(workload.axes)}
    reason = entry.availability()
    if reason:
        rec.update(status="unavailable", reason=reason)
        return rec
    device = torch.device("cuda")
    names = builtin.definition.input_names
    arg_values = [inputs[n] for n in names]
    stage = "load"
    try:
        loaded = entry.load()
        if hasattr(loaded.module, "routing_backend"):
            rec["routing"] = loaded.module.routing_backend()
        if hasattr(loaded.module, "config_source"):
            rec["config"] = loaded.module.config_source(*arg_values)
        state = None
        stage = "prepare"
        if loaded.prepare is not None:
            state = loaded.prepare(*arg_values)
            torch.cuda.synchronize()
        outputs = make_outputs(builtin, workload, device)
        stage = "run"
        outs = call(loaded, arg_values, outputs, state)
        torch.cuda.synchronize()
        rec["out"] = [describe(o) for o in outs]
        if entry.kind == "complete":
            stage = "check"
            rec["check"] = compare(builtin, inputs, outs, refs)
        stage = "time"
        rec["timing"] = time_call(lambda: call(loaded, arg_values, outputs, state), args.iters, args.warmup)
        if edge is not None and entry.kind == "complete":
            try:
                e_args = [edge["inputs"][n] for n in names]
                e_state = loaded.prepare(*e_args) if loaded.prepare is not None else None
                e_outs = call(loaded, e_args, make_outputs(builtin, workload, device), e_state)
                torch.cuda.synchronize()
                rec["edge"] = edge_report(e_outs, edge)
            except Exception as exc:
                rec["edge"] = f"ERROR {one_line(exc)}"
        ok = rec.get("check", {}).get("passed", True)
        rec["status"] = "ok" if ok else "WRONG"
    except Exception as exc:  # one line, go on
        rec.update(status="error", stage=stage, error=one_line(exc), traceback=traceback.format_exc())
        if args.verbose:
            traceback.print_exc()
    finally:
        try:
            torch.cuda.synchronize()
        except Exception as exc:  # a sticky CUDA error: later calls in this process fail too
            rec.setdefault("cuda_context", one_line(exc))
    return rec


def edge_report(outs: Tuple[Any, ...], edge: Dict[str, Any]) -> str:
    """Attention, token 0 with all indices -1: what output row 0 and lse[0] hold."""
    out, lse = outs[0][0].float(), outs[1][0]
    parts = [f"out row max|x| {out.abs().max().item():.3g}" + (" (NaN!)" if torch.isnan(out).any() else ""),
             f"lse {sorted(set(lse.tolist()))[:3]}"]
    good = bool((out == 0).all()) and bool(torch.isneginf(lse).all())
    return ("OK (0 / -inf)" if good else "DIFFERS from 0 / -inf: ") + ("" if good else ", ".join(parts))


def environment() -> Dict[str, Any]:
    env: Dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "cuda": torch.version.cuda}
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception as exc:
        env["triton"] = one_line(exc)
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name()
        env["capability"] = "sm_%d%d" % torch.cuda.get_device_capability()
    from importlib import metadata
    for dist in ("flashinfer-python", "apache-tvm-ffi"):
        try:
            env[dist] = metadata.version(dist)
        except Exception:
            env[dist] = None
    try:
        import importlib.util
        spec = importlib.util.find_spec("flashinfer_jit_cache")
        env["flashinfer_jit_cache"] = spec.origin if spec else None
    except Exception:
        env["flashinfer_jit_cache"] = None
    env["FLASHINFER_WORKSPACE_BASE"] = os.environ.get("FLASHINFER_WORKSPACE_BASE")
    return env


def fmt_row(rec: Dict[str, Any]) -> str:
    axes = ",".join(f"{k}={v}" for k, v in rec["axes"].items())
    head = f"  {rec['baseline']:<40} {axes:<34}"
    status = rec["status"]
    if status == "unavailable":
        return f"{head} unavailable: {rec['reason']}"
    if status == "error":
        return f"{head} ERROR in {rec['stage']}: {rec['error']}"
    t = rec.get("timing", {})
    chk = rec.get("check")
    verdict = "timing only (lower bound)" if chk is None else (
        f"{'PASS' if chk['passed'] else 'FAIL'} matched {chk.get('matched_ratio', 0):.4f} "
        f"maxerr {chk.get('max_abs_err', float('nan')):.3g}")
    line = f"{head} {t.get('median_us', float('nan')):9.1f} us  {verdict}"
    if chk is not None and not chk["passed"]:
        notes = [chk.get("note")] + [f"{k}: {v.get('note') or v}" for k, v in chk.get("outputs", {}).items()
                                     if v.get("matched_ratio", 1) < 1]
        line += "\n      " + " | ".join(str(n) for n in notes if n)
    if rec.get("routing"):
        line += f"  [routing: {rec['routing']}]"
    if rec.get("config"):
        line += f"\n      config: {rec['config']}"
    if rec.get("edge"):
        line += f"\n      edge (all -1 row): {rec['edge']}"
    if rec.get("cuda_context"):
        line += f"\n      CUDA context broken afterwards: {rec['cuda_context']}"
    return line


def selected(args: argparse.Namespace):
    """(definition, its baselines named by ``--baseline``, or all) for each ``--definition``; a
    definition that does not resolve is printed and skipped."""
    for dname in args.definition or DEFAULT_DEFINITIONS:
        try:
            builtin = get(dname)
        except Exception as exc:
            print(f"[{dname}] {one_line(exc)}")
            continue
        yield builtin, [e for e in all_baselines(builtin.name) if not args.baseline or e.key in args.baseline]


def run_isolated(args: argparse.Namespace, env: Dict[str, Any]) -> int:
    """One child process per (definition, baseline); merges their JSON records."""
    import subprocess
    import tempfile

    records: List[Dict[str, Any]] = []
    for builtin, entries in selected(args):
        print(f"\n[{builtin.name}]  {len(entries)} baselines (one process each)", flush=True)
        for entry in entries:
            reason = entry.availability()
            if reason:
                rec = {"definition": builtin.name, "baseline": entry.key, "label": entry.label,
                       "kind": entry.kind, "status": "unavailable", "reason": reason, "axes": {}}
                records.append(rec)
                print(fmt_row(rec), flush=True)
                continue
            with tempfile.TemporaryDirectory(prefix="kw-selfcheck-") as tmp:
                cmd = [sys.executable, "-m", "kernelwright.baselines.selfcheck", "--child", "--no-isolate",
                       "--definition", builtin.name, "--baseline", entry.key, "--out", tmp,
                       "--iters", str(args.iters), "--warmup", str(args.warmup), "--seed", str(args.seed)]
                cmd += ["--all-public"] if args.all_public else []
                cmd += ["--verbose"] if args.verbose else []
                proc = subprocess.run(cmd, check=False)
                path = Path(tmp) / "baselines_selfcheck.json"
                got = json.loads(path.read_text())["records"] if path.is_file() else []
            records.extend(got)
            if proc.returncode != 0:
                rec = {"definition": builtin.name, "baseline": entry.key, "label": entry.label,
                       "kind": entry.kind, "status": "error", "stage": "process",
                       "error": f"child exited with code {proc.returncode} after {len(got)} records",
                       "axes": {}}
                records.append(rec)
                print(fmt_row(rec), flush=True)
            write_json(args.out, env, records)
    write_json(args.out, env, records)
    summarize(records, args.out)
    return 0


def write_json(out: Optional[Path], env: Dict[str, Any], records: List[Dict[str, Any]]) -> None:
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "baselines_selfcheck.json").write_text(
            json.dumps({"environment": env, "records": records}, indent=1, default=str))


def summarize(records: List[Dict[str, Any]], out: Optional[Path]) -> None:
    ok = sum(r.get("status") == "ok" for r in records)
    bad = sum(r.get("status") in ("error", "WRONG") for r in records)
    gone = sum(r.get("status") == "unavailable" for r in records)
    print(f"\nselfcheck: {ok} ok, {bad} error/wrong, {gone} unavailable")
    if out is not None:
        print(f"selfcheck: wrote {out / 'baselines_selfcheck.json'}")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Self-check of the kernelwright baselines on CUDA.")
    ap.add_argument("--definition", action="append", default=None,
                    help="definition name or alias (moe/indexer/attention); repeatable")
    ap.add_argument("--baseline", action="append", default=None, help="only these baselines (keys: the folder name, <folder>_SUFFIX for manifest.SUFFIX.json)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--all-public", action="store_true", help="every public workload, not two")
    ap.add_argument("--verbose", action="store_true", help="print full tracebacks")
    ap.add_argument("--no-isolate", dest="isolate", action="store_false",
                    help="run every baseline in this process (default: one subprocess per "
                         "definition and baseline, so a sticky CUDA error or a crash in one "
                         "cannot take the others down)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    env = environment()
    if not args.child:
        print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    if args.isolate and torch.cuda.is_available():
        return run_isolated(args, env)
    if not torch.cuda.is_available():
        print("selfcheck: no CUDA device; nothing to run (availability per baseline below)")
        for entry in all_baselines():
            print(f"  {entry.key:<40} {entry.availability() or 'available'}")
        return 0

    device = torch.device("cuda")
    records: List[Dict[str, Any]] = []
    json_path = None
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        json_path = args.out / "baselines_selfcheck.json"

    def dump() -> None:  # after every record, so a run cut short still leaves its results
        if json_path is not None:
            json_path.write_text(json.dumps({"environment": env, "records": records}, indent=1, default=str))
    for builtin, entries in selected(args):
        if not entries:
            continue
        if not args.child:
            print(f"\n[{builtin.name}]  {len(entries)} baselines", flush=True)
        for wl in pick_workloads(builtin, args.all_public):
            gen = torch.Generator(device=device).manual_seed(args.seed)
            try:
                inputs = builtin.make_inputs(builtin.definition, wl, gen, device)
                arg_values = [inputs[n] for n in builtin.definition.input_names]
                print(f" workload {wl.uuid} {dict(wl.axes)}\n   inputs: "
                      f"{describe_args(builtin.definition.input_names, arg_values)}", flush=True)
                t0 = time.perf_counter()
                refs = as_tuple(builtin.reference(*arg_values))
                torch.cuda.synchronize()
                print(f"   reference: {(time.perf_counter() - t0) * 1e3:.1f} ms (one call, host clock); "
                      f"outputs {', '.join(describe(r) for r in refs)}", flush=True)
            except Exception as exc:
                print(f"   inputs/reference FAILED: {one_line(exc)}")
                records.append({"definition": builtin.name, "workload": wl.uuid, "status": "error",
                                "stage": "inputs/reference", "error": one_line(exc),
                                "traceback": traceback.format_exc()})
                continue
            edge = None
            if builtin.checker == "attention":
                e_inputs = dict(inputs)
                idx = inputs["sparse_indices"].clone()
                idx[0] = -1
                e_inputs["sparse_indices"] = idx
                edge = {"inputs": e_inputs}
            for entry in entries:
                rec = run_entry(entry, builtin, wl, inputs, refs, args, edge)
                rec["definition"] = builtin.name
                records.append(rec)
                print(fmt_row(rec), flush=True)
                dump()
            del inputs, refs, arg_values
            torch.cuda.empty_cache()

    dump()
    if not args.child:
        summarize(records, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
