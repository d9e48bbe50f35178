"""``run_bench`` across every GPU: the same plans, the same result type, traces streamed to disk.

One job per (definition, workload) with all of the plan's candidates (see docs/cluster.md for
why), served by an ``EvaluationPool`` (local: one pool worker per GPU; Ray: one actor per GPU).
Each trace is appended to ``<out>/traces/<definition><suffix>.jsonl`` the moment it arrives
(in arrival order); ``BenchRun.traces`` is returned in the sequential runner's order.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from kernelwright.cluster.devices import DeviceSpec
from kernelwright.cluster.jobs import EvalJob, JobError, jobs_from_plans
from kernelwright.cluster.pool import EvaluationPool
from kernelwright.gate.bench import write_roster, BenchPlan, BenchRun, ProgressHook
from kernelwright.gate.evaluate import GateConfig
from kernelwright.gate.session import Timeouts
from kernelwright.trace import Trace
from kernelwright.trace.jsonio import append_jsonl


def run_bench_distributed(plans: List[BenchPlan], cfg: GateConfig, out_dir: Path, *, backend: str = "local",
                          devices: DeviceSpec = None, ray_address: Optional[str] = None,
                          timeouts: Optional[Timeouts] = None, progress: Optional[ProgressHook] = None,
                          trace_file_suffix: str = "", pool: Optional[EvaluationPool] = None,
                          **pool_options) -> BenchRun:
    """Evaluate every candidate of every plan on every workload, spread over the devices.

    ``backend``: "local" (one pool worker per device of ``devices``; default every visible GPU,
    or one CPU slot when ``cfg.device`` is cpu) or "ray" (one actor per GPU of the cluster at
    ``ray_address``: "auto", "ray://head:10001", or None to start/reuse a local Ray); without
    Ray installed "ray" falls back to the local pool with a one-line notice.  ``pool``: an
    existing pool to use (left open).  Other keyword arguments go to ``EvaluationPool``.

    Raises ``JobError`` after the run if the trusted side of a job failed (as ``run_bench``
    would have raised); every trace that was produced is written first.
    """
    out_dir = Path(out_dir)
    (out_dir / "traces").mkdir(parents=True, exist_ok=True)
    result = BenchRun(out_dir=out_dir)
    started = time.perf_counter()
    total = sum(len(p.workloads) * sum(1 for c in p.candidates if not c.skip_reason) for p in plans)
    write_roster(plans, out_dir)  # who is who, first (as run_bench does)
    jobs = jobs_from_plans(plans, cfg, timeouts, log_dir=out_dir / "logs")
    lock = threading.Lock()
    done = [0]
    collected: List[Tuple[Tuple[int, int, int], str, Trace]] = []
    written: Dict[Path, List[str]] = {}     # what this run appended, to verify the files at the end

    def report(desc: str) -> None:
        done[0] += 1
        if progress:
            progress(desc, done[0], total)

    def on_trace(job: EvalJob, index: int, trace: Trace) -> None:
        name = job.builtin.name
        device = ((trace.evaluation.gate.notes.get("cluster") or {}).get("device")
                  if trace.evaluation and trace.evaluation.gate else None)
        with lock:
            path = out_dir / "traces" / f"{name}{trace_file_suffix}.jsonl"
            if path not in written:
                written[path] = path.read_text().splitlines() if path.exists() else []
            append_jsonl([trace], path)
            written[path].append(trace.model_dump_json())
            collected.append(((job.tag[0], job.tag[1], index), name, trace))
            report(f"{job.builtin.short}: {job.candidates[index].label} on {job.workload.uuid[:8]}"
                   + (f" [{device}]" if device else ""))

    def on_lower_bound(job: EvalJob, index: int, solution: str, ms: Optional[float]) -> None:
        with lock:
            result.lower_bounds.setdefault(job.builtin.name, {}).setdefault(solution, {})[job.workload.uuid] = ms
            (out_dir / "lower_bounds.json").write_text(json.dumps(result.lower_bounds, indent=1))
            report(f"{job.builtin.short}: {job.candidates[index].label} on {job.workload.uuid[:8]}")

    own = pool is None
    if own:
        pool = EvaluationPool(devices, backend=backend, kind=cfg.device, ray_address=ray_address,
                              log_root=str(out_dir / "logs"), **pool_options)
    errors: List[JobError] = []
    try:
        futures = [pool.submit(job, on_trace, on_lower_bound) for job in jobs]
        for fut in futures:
            try:
                fut.result()
            except JobError as exc:
                errors.append(exc)
    except BaseException:
        if own:
            pool.terminate()
            own = False
        raise
    finally:
        if own:
            pool.close()
    _verify_written(written, pool.notice if pool is not None else None)
    if progress:
        progress("done", done[0], total)
    traces: Dict[str, List[Trace]] = {}
    for _, name, trace in sorted(collected, key=lambda item: item[0]):
        traces.setdefault(name, []).append(trace)
    result.traces = traces
    result.seconds = time.perf_counter() - started
    if result.lower_bounds:
        (out_dir / "lower_bounds.json").write_text(json.dumps(result.lower_bounds, indent=1))
    if errors:
        raise errors[0]
    return result


def _verify_written(written: Dict[Path, List[str]], notice) -> None:
    """The results folder cannot be watched file-by-file while several GPUs append to it (the
    gate's per-call snapshot would see the other GPUs' traces arrive), so the parent checks at
    the end that each traces file holds exactly what it appended, and restores it if not."""
    for path, lines in written.items():
        try:
            current = path.read_text().splitlines()
        except OSError:
            current = None
        if current != lines:
            path.write_text("".join(line + "\n" for line in lines))
            if notice:
                notice(f"{path} was modified during the run by something other than kernelwright; "
                       "restored from the traces received")
