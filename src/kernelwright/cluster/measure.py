"""Measure the evaluation pool: throughput with 1/2/4/8 GPUs, local pool and Ray, and whether
the same (solution, workload) measures the same on different GPUs.

    python -m kernelwright.cluster.measure --gpus 1,2,4,8 --backend local,ray --out DIR
    python -m kernelwright.cluster.measure --device cpu --quick --gpus 1,2 --backend local \\
        --definition demo --solution my_solution/ --limit 2 --out DIR            # CPU smoke test

For every backend x GPU count it runs ``kernelwright bench``'s plan (the shipped solutions on
the contest workloads, or --definition/--solution/--limit/--workloads), through
``run_bench_distributed``, into ``DIR/<backend>-<n>gpu/``.  A configuration that cannot run
here (fewer GPUs visible, Ray not installed, a Ray cluster too small) is recorded as skipped,
so the script runs unchanged on any machine.  Writes ``DIR/measure.json`` and ``DIR/measure.md``.

Throughput: evaluations ((solution, workload) pairs) and workload-trials (evaluations x trials)
per minute, over the whole run ("wall", including worker start-up) and from the moment every
worker was ready ("steady").  Agreement: for each (definition, solution, workload) measured on
two or more distinct GPUs (across all runs), the relative spread of the per-GPU latencies
(max-min over median) against noise: the trial-to-trial spread inside a trace and the spread of
repeated measurements on one GPU.  A workload agrees when spread <= max(--tolerance,
--noise-factor x noise).  On CPU pseudo-devices the numbers only show that the pipeline works.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple


def _parse_list(text: str) -> List[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m kernelwright.cluster.measure", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="1,2,4,8", help="GPU counts to run, comma-separated (default 1,2,4,8)")
    ap.add_argument("--backend", default="local,ray", help="local, ray or both (default local,ray)")
    ap.add_argument("--out", required=True, type=Path, help="results folder")
    ap.add_argument("--definition", "-d", action="append", help="definition name/alias (repeatable; default the contest three)")
    ap.add_argument("--solution", "-s", action="append", type=Path, help="extra solution folder / JSON (repeatable)")
    ap.add_argument("--no-shipped", action="store_true", help="leave out the shipped solutions")
    ap.add_argument("--workloads", "-w", action="append", help="workload uuid prefixes or indices")
    ap.add_argument("--limit", type=int, help="only the first N workloads per definition")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (pseudo-devices: smoke test only)")
    ap.add_argument("--quick", action="store_true", help="reduced sizes and iterations (as bench --quick)")
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--iterations", type=int)
    ap.add_argument("--trials", type=int)
    ap.add_argument("--ray-address", default=None, help="Ray cluster address (auto, ray://head:10001); default: a local Ray")
    ap.add_argument("--tolerance", type=float, default=0.05, help="relative spread always accepted (default 0.05)")
    ap.add_argument("--noise-factor", type=float, default=3.0, help="spread accepted as a multiple of the noise (default 3)")
    return ap


# -- plan (the same choice as `kernelwright bench`) -----------------------------------------
def build_plans(args) -> List[Any]:
    from kernelwright import definitions
    from kernelwright.selection import load_solution, pick_workloads
    from kernelwright.gate.bench import BenchPlan, Candidate
    from kernelwright.solutions import shipped_solutions

    chosen = ([definitions.get(n) for n in args.definition] if args.definition
              else definitions.all_builtins(include_demo=False))
    if args.quick:
        chosen = [b.quick_if(True) for b in chosen]
    extra = [load_solution(p) for p in args.solution or []]
    plans = []
    for b in chosen:
        base = b.base_name
        cands = [] if args.no_shipped else [Candidate(s, s.name) for s in shipped_solutions(base)]
        cands += [Candidate(s, s.name) for s in extra if s.definition == base]
        if cands:
            plans.append(BenchPlan(b, pick_workloads(b, args.workloads, args.limit), cands))
    return plans


def build_config(args):
    from kernelwright.gate.evaluate import GateConfig

    # what `kernelwright bench --quick` uses
    return GateConfig.preset(args.device, args.quick, warmup=args.warmup, iterations=args.iterations,
                             trials=args.trials)


# -- one configuration ----------------------------------------------------------------------
def _why_not(backend: str, n: int, kind: str, ray_state: Dict[str, Any]) -> Optional[str]:
    if backend == "local":
        if kind == "cuda":
            from kernelwright.cluster.devices import cuda_device_count

            visible = cuda_device_count()
            if n > visible:
                return f"{n} GPUs requested, {visible} visible on this machine"
        return None
    if not ray_state.get("available"):
        return "ray is not installed (pip install 'kernelwright[ray]')"
    if ray_state.get("error"):
        return ray_state["error"]
    if n > ray_state.get("gpus", 0):
        return f"{n} GPUs requested, the Ray cluster has {ray_state.get('gpus', 0)}"
    return None


def _ensure_ray(args, counts: List[int], state: Dict[str, Any]) -> None:
    if state:
        return
    from kernelwright.cluster.ray_backend import cluster_gpus, init_ray, ray_available

    state["available"] = ray_available()
    if not state["available"]:
        return
    try:
        kwargs: Dict[str, Any] = {}
        if args.device == "cpu" and not args.ray_address:
            # CPU smoke test: fake GPU resources so that num_gpus=1 actors schedule on CPU
            kwargs = {"num_gpus": max(counts), "num_cpus": max(2, os.cpu_count() or 2), "include_dashboard": False}
        state["owned"] = init_ray(args.ray_address, **kwargs)
        state["gpus"] = cluster_gpus()
    except Exception as exc:
        state["error"] = f"cannot reach Ray: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def run_one(plans, cfg, backend: str, n: int, out: Path, args) -> Tuple[Dict[str, Any], List[Any]]:
    from kernelwright.cluster.distributed import run_bench_distributed
    from kernelwright.cluster.pool import EvaluationPool

    record: Dict[str, Any] = {"backend": backend, "gpus": n, "out": str(out)}
    devices: Any = ["cpu"] * n if (backend == "local" and cfg.device == "cpu") else n
    t0 = time.perf_counter()
    pool = EvaluationPool(devices, backend=backend, kind=cfg.device, ray_address=args.ray_address,
                          log_root=str(out / "logs"))
    try:
        pool.wait_ready()
        t_ready = time.perf_counter()
        retired = [slot.worker for slot in pool.slots() if slot.state == "retired"]
        result = run_bench_distributed(plans, cfg, out, pool=pool)
        t_end = time.perf_counter()
    except BaseException:
        pool.terminate()
        raise
    pool.close()
    traces = [t for ts in result.traces.values() for t in ts]
    lower = sum(len(v) for d in result.lower_bounds.values() for v in d.values())
    evaluations = len(traces) + lower
    wall, steady = t_end - t0, t_end - t_ready
    per_device: Dict[str, int] = {}
    statuses: Dict[str, int] = {}
    for t in traces:
        dev = _device_of(t)[1]
        per_device[dev] = per_device.get(dev, 0) + 1
        statuses[t.evaluation.status.value] = statuses.get(t.evaluation.status.value, 0) + 1
    record.update({
        "status": "ok", "workers_retired": retired, "startup_s": round(t_ready - t0, 3), "wall_s": round(wall, 3),
        "steady_s": round(steady, 3), "evaluations": evaluations, "workload_trials": evaluations * cfg.trials,
        "evals_per_min_wall": round(evaluations / wall * 60, 3) if wall > 0 else None,
        "trials_per_min_wall": round(evaluations * cfg.trials / wall * 60, 3) if wall > 0 else None,
        "evals_per_min_steady": round(evaluations / steady * 60, 3) if steady > 0 else None,
        "trials_per_min_steady": round(evaluations * cfg.trials / steady * 60, 3) if steady > 0 else None,
        "per_device": per_device, "statuses": statuses,
    })
    return record, traces


def _device_of(trace) -> Tuple[str, str]:
    """(GPU identity for grouping: UUID where known, else label; label)."""
    notes = (trace.evaluation.gate.notes.get("cluster") or {}) if trace.evaluation and trace.evaluation.gate else {}
    label = notes.get("device") or "?"
    return notes.get("gpu") or label, label


# -- agreement across GPUs ---------------------------------------------------------------------
def _rel_sd(values: List[float]) -> Optional[float]:
    if len(values) < 2:
        return None
    m = statistics.mean(values)
    return statistics.stdev(values) / m if m > 0 else None


def agreement(all_traces: List[Tuple[str, Any]], tolerance: float, noise_factor: float) -> Dict[str, Any]:
    """Per (definition, solution, workload): latencies per GPU, their spread and the noise."""
    groups: Dict[Tuple[str, str, str], List[Tuple[str, str, str, float, List[float]]]] = {}
    for run_id, t in all_traces:
        if not t.passed or t.evaluation.performance is None:
            continue
        gpu, label = _device_of(t)
        perf = t.evaluation.performance
        groups.setdefault((t.definition, t.solution, t.workload.uuid), []).append(
            (run_id, gpu, label, perf.latency_ms, list(perf.latency_samples_ms or [])))
    rows = []
    for (definition, solution, workload), ms in sorted(groups.items()):
        per_gpu: Dict[str, List[float]] = {}
        labels: Dict[str, str] = {}
        for _, gpu, label, lat, _ in ms:
            per_gpu.setdefault(gpu, []).append(lat)
            labels[gpu] = label
        noise_terms = [x for x in (_rel_sd(s) for *_, s in ms) if x is not None]
        noise_terms += [x for x in (_rel_sd(v) for v in per_gpu.values()) if x is not None]
        noise = statistics.median(noise_terms) if noise_terms else 0.0
        row = {"definition": definition, "solution": solution, "workload": workload, "measurements": len(ms),
               "gpus": {labels[g]: round(statistics.mean(v), 6) for g, v in per_gpu.items()},
               "noise": round(noise, 5)}
        if len(per_gpu) >= 2:
            means = [statistics.mean(v) for v in per_gpu.values()]
            med = statistics.median(means)
            spread = (max(means) - min(means)) / med if med > 0 else 0.0
            threshold = max(tolerance, noise_factor * noise)
            row.update({"spread": round(spread, 5), "threshold": round(threshold, 5), "agree": spread <= threshold})
        else:
            row.update({"spread": None, "threshold": None, "agree": None})
        rows.append(row)
    compared = [r for r in rows if r["agree"] is not None]
    return {"tolerance": tolerance, "noise_factor": noise_factor, "rows": rows,
            "compared": len(compared), "agree": sum(1 for r in compared if r["agree"]),
            "disagree": [f"{r['definition']}/{r['solution']}/{r['workload']}" for r in compared if not r["agree"]],
            "max_spread": max((r["spread"] for r in compared), default=None)}


def status_consistency(all_traces: List[Tuple[str, Any]]) -> List[str]:
    """(definition, solution, workload) whose status differs between runs (must be empty)."""
    seen: Dict[Tuple[str, str, str], set] = {}
    for _, t in all_traces:
        seen.setdefault((t.definition, t.solution, t.workload.uuid), set()).add(t.evaluation.status.value)
    return [f"{d}/{s}/{w}: {sorted(v)}" for (d, s, w), v in sorted(seen.items()) if len(v) > 1]


# -- report --------------------------------------------------------------------------------
def render(record: Dict[str, Any]) -> str:
    lines = ["# kernelwright cluster measurement", "",
             f"{record['date']} on {record['host']} ({record['hardware']}), device `{record['device']}`, "
             f"{record['plan']['evaluations_per_run']} evaluations per run "
             f"({record['plan']['definitions']}), {record['config']['trials']} trials each", "",
             "| backend | GPUs | status | startup s | wall s | evals/min (wall) | trials/min (wall) | "
             "trials/min (steady) | speed-up | per device |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in record["runs"]:
        if r["status"] != "ok":
            lines.append(f"| {r['backend']} | {r['gpus']} | {r['status']}: {r.get('reason', '')} | | | | | | | |")
            continue
        per = ", ".join(f"{k}: {v}" for k, v in sorted(r["per_device"].items()))
        speed = f"{r['speedup']:.2f}x" if r.get("speedup") else ""
        lines.append(f"| {r['backend']} | {r['gpus']} | ok | {r['startup_s']:.1f} | {r['wall_s']:.1f} | "
                     f"{r['evals_per_min_wall']} | {r['trials_per_min_wall']} | {r['trials_per_min_steady']} | "
                     f"{speed} | {per} |")
    ag = record["agreement"]
    lines += ["", f"Latency agreement across GPUs: {ag['agree']}/{ag['compared']} (definition, solution, workload) "
              f"agree (spread <= max({ag['tolerance']:.0%}, {ag['noise_factor']:g} x noise)); "
              f"largest spread {ag['max_spread'] if ag['max_spread'] is not None else '-'}", ""]
    compared = [r for r in ag["rows"] if r["agree"] is not None]
    if compared:
        lines += ["| definition | solution | workload | ms per GPU | spread | noise | agree |", "|---|---|---|---|---|---|---|"]
        for r in sorted(compared, key=lambda r: -r["spread"]):
            per = ", ".join(f"{k}: {v:.4g}" for k, v in sorted(r["gpus"].items()))
            lines.append(f"| {r['definition']} | {r['solution']} | {r['workload'][:12]} | {per} | "
                         f"{r['spread']:.1%} | {r['noise']:.1%} | {'yes' if r['agree'] else 'NO'} |")
    if record["status_mismatches"]:
        lines += ["", "Status differs between runs (should never happen):"] + [f"- {m}" for m in record["status_mismatches"]]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    backends = _parse_list(args.backend)
    bad = [b for b in backends if b not in ("local", "ray")]
    if bad:
        print(f"error: unknown backend(s) {bad}: use local and/or ray", file=sys.stderr)
        return 2
    counts = sorted({int(x) for x in _parse_list(args.gpus)})
    if not counts or min(counts) < 1:
        print("error: --gpus needs positive counts, e.g. 1,2,4,8", file=sys.stderr)
        return 2
    plans = build_plans(args)
    if not plans:
        print("error: nothing to run: no solution matches the selected definitions", file=sys.stderr)
        return 2
    cfg = build_config(args)
    kind = "cuda" if cfg.device.startswith("cuda") else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    record: Dict[str, Any] = {
        "command": " ".join([sys.executable, "-m", "kernelwright.cluster.measure"] + (argv if argv is not None else sys.argv[1:])),
        "date": _dt.datetime.now().isoformat(timespec="seconds"), "host": socket.gethostname(),
        "platform": platform.platform(), "hardware": None, "device": cfg.device,
        "config": dict(cfg.__dict__),
        "plan": {"definitions": ", ".join(p.builtin.name for p in plans),
                 "candidates": {p.builtin.name: [c.label for c in p.candidates if not c.skip_reason] for p in plans},
                 "workloads": {p.builtin.name: len(p.workloads) for p in plans},
                 "evaluations_per_run": sum(len(p.workloads) * len([c for c in p.candidates if not c.skip_reason])
                                            for p in plans)},
        "runs": [],
    }
    ray_state: Dict[str, Any] = {}
    all_traces: List[Tuple[str, Any]] = []
    try:
        for backend in backends:
            if backend == "ray":
                _ensure_ray(args, counts, ray_state)
            base: Optional[float] = None
            for n in counts:
                why = _why_not(backend, n, kind, ray_state)
                if why:
                    record["runs"].append({"backend": backend, "gpus": n, "status": "skipped", "reason": why})
                    print(f"{backend} x{n}: skipped ({why})", flush=True)
                    continue
                print(f"{backend} x{n}: running ...", flush=True)
                try:
                    run, traces = run_one(plans, cfg, backend, n, args.out / f"{backend}-{n}gpu", args)
                except Exception as exc:
                    msg = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                    record["runs"].append({"backend": backend, "gpus": n, "status": "failed", "reason": msg})
                    print(f"{backend} x{n}: failed ({msg})", flush=True)
                    continue
                rate = run["trials_per_min_steady"]
                if base is None and rate:
                    base = rate / n   # per-GPU rate of the smallest configuration that ran
                run["speedup"] = round(rate / base, 3) if base and rate else None
                record["runs"].append(run)
                all_traces += [(f"{backend}-{n}", t) for t in traces]
                print(f"{backend} x{n}: {run['evaluations']} evaluations in {run['wall_s']:.1f} s "
                      f"({run['trials_per_min_wall']} workload-trials/min)", flush=True)
    finally:
        if ray_state.get("owned"):
            import ray

            ray.shutdown()
    hardware = sorted({t.evaluation.environment.hardware for _, t in all_traces if t.evaluation})
    record["hardware"] = ", ".join(hardware) or "unknown (nothing ran)"
    record["agreement"] = agreement(all_traces, args.tolerance, args.noise_factor)
    record["status_mismatches"] = status_consistency(all_traces)
    (args.out / "measure.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    table = render(record)
    (args.out / "measure.md").write_text(table)
    print(table)
    ran = [r for r in record["runs"] if r["status"] == "ok"]
    return 0 if ran and not record["status_mismatches"] else 1


if __name__ == "__main__":
    sys.exit(main())
