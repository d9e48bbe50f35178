"""The Profiler: a tool (not an agent) that turns a solution into a short bottleneck summary.

For one representative workload per regime (the largest public workload of each regime) it

* measures the call's latency (median of repeats; CUDA events on a GPU, ``perf_counter`` on CPU)
  and, where the device's ceilings are known (``kernelwright device-info``), the roofline
  fraction = physical floor / measured latency;
* with Nsight Compute (``ncu`` on PATH and a GPU): runs the call under ``ncu`` (SpeedOfLight,
  Occupancy, LaunchStats sections) and classifies each kernel as memory-, compute- or
  latency-bound from its throughput percentages;
* otherwise: the torch profiler's top operators/kernels by self time.

Solution code is untrusted: the orchestrator runs this module in a subprocess on a leased device
(:func:`run_profile`).  Command line (also ``kernelwright profile``)::

    python -m kernelwright.workflow.profiler SOLUTION -d DEFINITION [--quick] [--device cpu] [--tool auto|ncu|torch]
"""

from __future__ import annotations

import argparse
import csv
import importlib
import io
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from kernelwright.workflow.leases import Lease

NCU_SECTIONS = ["SpeedOfLight", "Occupancy", "LaunchStats"]


# -- loading and calling a solution ----------------------------------------------------------
def _load_entry(solution_dir: Path):
    from kernelwright.solutions import load_solution_folder

    sol = load_solution_folder(solution_dir)
    root = Path(tempfile.mkdtemp(prefix="kw-profile-"))
    package = f"kwprof_{sol.content_hash()[:12]}"
    sol.write_sources(root / package)
    sys.path.insert(0, str(root))
    module = importlib.import_module(package + "." + sol.spec.entry_file[:-3].replace("/", "."))
    return sol, getattr(module, sol.spec.entry_symbol)


def _mismatch(solution_dir: Path, definition: str) -> Optional[str]:
    """A one-line problem with the request (unknown definition, unreadable manifest, a solution
    written for another definition), or None."""
    from kernelwright import definitions
    from kernelwright.solutions import load_solution_folder

    try:
        builtin = definitions.resolve(definition)
        sol = load_solution_folder(solution_dir)
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    return builtin.foreign_solution(sol)


def _manifest_definition(solution_dir: Path) -> Tuple[str, Optional[str]]:
    """The definition a solution folder's manifest names, and a one-line problem or None."""
    from kernelwright.solutions import load_solution_folder

    try:
        return load_solution_folder(solution_dir).definition, None
    except Exception as exc:
        return "", f"{solution_dir}: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


def _builtin(definition: str, quick: bool):
    from kernelwright import definitions

    b = definitions.resolve(definition)
    return b.quick_if(quick)


def representatives(builtin) -> List[Any]:
    """The largest public workload (by product of its axes) of each regime, in regime order."""
    best: Dict[str, Tuple[float, Any]] = {}
    for w in builtin.public_workloads():
        axes = builtin.definition.axis_values(w.axes)
        regime = builtin.regime(axes)
        size = 1.0
        for v in w.axes.values():
            size *= max(1, int(v))
        if regime not in best or size > best[regime][0]:
            best[regime] = (size, w)
    order = builtin.regimes_order or sorted(best)
    return [best[r][1] for r in order if r in best] + [v[1] for k, v in best.items() if k not in order]


def _call_factory(builtin, sol, fn, workload, device):
    import torch

    from kernelwright.inputs import make_generator
    from kernelwright.trace import torch_dtype

    definition = builtin.definition
    inputs = builtin.make_inputs(definition, workload, make_generator(1234, device), device)
    args = [inputs[n] for n in definition.inputs]
    outs = [torch.empty(definition.shape_of(n, workload.axes), dtype=torch_dtype(s.dtype), device=device)
            for n, s in definition.outputs.items()]
    if sol.spec.destination_passing_style:
        return (lambda: fn(*args, *outs)), inputs
    return (lambda: fn(*args)), inputs


def _latency_ms(call, device, repeats: int) -> float:
    from kernelwright.gate.timing import eager_event_ms

    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            times.append(eager_event_ms(call))
        else:
            t0 = time.perf_counter()
            call()
            times.append((time.perf_counter() - t0) * 1e3)
    return float(statistics.median(times))


def profile_local(solution_dir: Path, definition: str, quick: bool, device_name: str, tool: str,
                  repeats: int = 5) -> Dict[str, Any]:
    """Profile in this process (what the subprocess runs).  Returns a dict with ``regimes``."""
    import torch

    from kernelwright.gate.device_info import load_ceilings

    device = torch.device("cuda" if device_name.startswith("cuda") else "cpu")
    builtin = _builtin(definition, quick)
    sol, fn = _load_entry(Path(solution_dir))
    ceilings = load_ceilings(device)
    use_ncu = tool == "ncu" or (tool == "auto" and device.type == "cuda" and shutil.which("ncu"))
    regimes = []
    for workload in representatives(builtin):
        axes = builtin.definition.axis_values(workload.axes)
        call, inputs = _call_factory(builtin, sol, fn, workload, device)
        call()
        if device.type == "cuda":
            torch.cuda.synchronize()
        lat = _latency_ms(call, device, repeats)
        entry: Dict[str, Any] = {"regime": builtin.regime(axes), "workload": workload.uuid,
                                 "axes": dict(workload.axes), "latency_ms": lat}
        try:
            work = builtin.roofline(inputs, axes)
            entry["work"] = {"flops": work.flops, "bytes": work.bytes, "unit": work.unit}
            if ceilings is not None:
                floor_ms = work.floor_s(ceilings["measured"]) * 1e3
                entry["floor_ms"] = floor_ms
                entry["roofline_fraction"] = floor_ms / lat if lat > 0 else None
        except Exception as exc:  # a roofline model that cannot handle these inputs
            entry["roofline_error"] = str(exc)[:200]
        if not use_ncu:
            entry["ops"] = _torch_profile(call, device)
        regimes.append(entry)
    return {"tool": "ncu" if use_ncu else "torch.profiler", "device": str(device), "regimes": regimes,
            "ceilings": None if ceilings is None else ceilings.get("source", "known")}


def _torch_profile(call, device, top: int = 8) -> List[Dict[str, Any]]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with _without_usdt_lines(), profile(activities=acts) as prof:
        for _ in range(3):
            call()
        if device.type == "cuda":
            torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        dev_us = getattr(e, "self_device_time_total", 0) or getattr(e, "self_cuda_time_total", 0) or 0
        rows.append({"name": e.key, "calls": e.count, "self_cpu_us": e.self_cpu_time_total / 3,
                     "self_device_us": dev_us / 3})
    key = "self_device_us" if device.type == "cuda" else "self_cpu_us"
    rows.sort(key=lambda r: -r[key])
    return [r for r in rows[:top] if r[key] > 0]


@contextlib.contextmanager
def _without_usdt_lines():
    """Standard error (the file descriptor: the profiler's C++ side writes there) through a
    temporary file, passed on without Kineto's ``USDT:`` trace lines (profiler start / stop)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [line for line in tmp.read().splitlines(keepends=True) if not line.startswith(b"USDT:")]
            if kept:
                os.write(2, b"".join(kept))


# -- Nsight Compute ---------------------------------------------------------------------------
def parse_ncu_csv(text: str) -> List[Dict[str, Any]]:
    """Kernels from ``ncu --csv --page details`` output: one dict per kernel name with averaged
    metrics (duration in microseconds, throughputs in %), launches counted."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return []
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    per_launch: Dict[Tuple[str, str], Dict[str, float]] = {}
    names: Dict[Tuple[str, str], str] = {}
    for row in reader:
        try:
            launch = (row["ID"], row["Kernel Name"])
            metric, unit, raw = row["Metric Name"], row.get("Metric Unit", ""), row["Metric Value"]
        except KeyError:
            continue
        try:
            value = float(str(raw).replace(",", ""))
        except ValueError:
            continue
        if metric == "Duration":
            value *= {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1.0)
        per_launch.setdefault(launch, {})[metric] = value
        names[launch] = row["Kernel Name"]
    kernels: Dict[str, Dict[str, Any]] = {}
    for launch, metrics in per_launch.items():
        k = kernels.setdefault(names[launch], {"name": names[launch], "launches": 0, "_sum": {}})
        k["launches"] += 1
        for m, v in metrics.items():
            k["_sum"][m] = k["_sum"].get(m, 0.0) + v
    out = []
    for k in kernels.values():
        avg = {m: v / k["launches"] for m, v in k.pop("_sum").items()}
        k.update({"duration_us": avg.get("Duration"), "memory_pct": avg.get("Memory Throughput"),
                  "dram_pct": avg.get("DRAM Throughput"), "compute_pct": avg.get("Compute (SM) Throughput"),
                  "occupancy_pct": avg.get("Achieved Occupancy"), "registers": avg.get("Registers Per Thread"),
                  "waves": avg.get("Waves Per SM")})
        k["bound"] = classify(k["memory_pct"], k["compute_pct"], k["dram_pct"])
        out.append(k)
    out.sort(key=lambda k: -(k["duration_us"] or 0) * k["launches"])
    return out


def classify(memory_pct: Optional[float], compute_pct: Optional[float], dram_pct: Optional[float] = None) -> str:
    """memory-bound / compute-bound / latency-bound from SpeedOfLight throughput percentages."""
    mem = max(x for x in (memory_pct, dram_pct, 0.0) if x is not None)
    comp = compute_pct or 0.0
    if max(mem, comp) < 40.0:
        return "latency-bound"
    return "memory-bound" if mem >= comp else "compute-bound"


def _ncu(solution_dir: Path, definition: str, quick: bool, workload: str, timeout_s: float) -> List[Dict[str, Any]]:
    argv = ["ncu", "--csv", "--page", "details", "--target-processes", "all", "-c", "40"]
    for s in NCU_SECTIONS:
        argv += ["--section", s]
    argv += [sys.executable, "-m", "kernelwright.workflow.profiler", str(solution_dir), "-d", definition,
             "--target", workload] + (["--quick"] if quick else [])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    kernels = parse_ncu_csv(proc.stdout)
    if not kernels and proc.returncode != 0:
        raise RuntimeError((proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["ncu failed"])
    return kernels


def _target(solution_dir: Path, definition: str, quick: bool, workload_uuid: str, calls: int = 3) -> None:
    import torch

    device = torch.device("cuda")
    builtin = _builtin(definition, quick)
    sol, fn = _load_entry(solution_dir)
    workload = next(w for w in builtin.public_workloads() if w.uuid == workload_uuid)
    call, _ = _call_factory(builtin, sol, fn, workload, device)
    for _ in range(calls):
        call()
    torch.cuda.synchronize()


# -- the summary -------------------------------------------------------------------------------
def render(data: Dict[str, Any]) -> str:
    """Markdown bottleneck summary (a few lines per regime)."""
    lines = [f"# Profile ({data['tool']}, {data['device']})", ""]
    for r in data["regimes"]:
        rf = r.get("roofline_fraction")
        roof = (f"roofline fraction {rf:.1%} (floor {r['floor_ms'] * 1e3:.1f} us)" if rf is not None
                else "roofline fraction n/a (no ceilings for this device)")
        lines.append(f"## regime {r['regime']}: workload {r['workload'][:12]} {r['axes']}")
        lines.append(f"- latency {r['latency_ms'] * 1e3:.1f} us; {roof}")
        if r.get("work"):
            w = r["work"]
            lat_s = r["latency_ms"] * 1e-3
            lines.append(f"- work {w['flops'] / 1e9:.3f} GFLOP ({w['unit']}), {w['bytes'] / 1e6:.3f} MB moved: "
                         f"achieved {w['bytes'] / lat_s / 1e9:.2f} GB/s, {w['flops'] / lat_s / 1e12:.4f} TFLOP/s")
        for k in r.get("kernels", [])[:6]:
            lines.append(f"- kernel `{k['name'][:60]}` x{k['launches']}: {k['duration_us'] or 0:.1f} us, "
                         f"memory {k['memory_pct'] or 0:.0f}%, compute {k['compute_pct'] or 0:.0f}%, "
                         f"occupancy {k['occupancy_pct'] or 0:.0f}%, regs {k['registers'] or 0:.0f} -> **{k['bound']}**")
        if r.get("ncu_error"):
            lines.append(f"- ncu failed: {r['ncu_error']}")
        for op in r.get("ops", [])[:6]:
            t = op["self_device_us"] if data["device"].startswith("cuda") else op["self_cpu_us"]
            lines.append(f"- op `{op['name'][:60]}` x{op['calls'] // 3 or 1}/call: {t:.1f} us self")
        if data["device"] == "cpu":
            lines.append("- (CPU: Triton runs in the interpreter here; op-level numbers say little about a GPU)")
        lines.append("")
    return "\n".join(lines)


def run_profile(solution_dir: Path, definition: str, quick: bool, lease: Optional[Lease], out_dir: Path,
                timeout_s: float = 1800.0) -> Tuple[str, str]:
    """Profile in a subprocess on the leased device; returns (tool, markdown summary).
    Never raises for what the solution does: a failure becomes the summary's text."""
    from kernelwright.workflow.evaljob import device_env, run_child

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "profile.json"
    argv = [sys.executable, "-m", "kernelwright.workflow.profiler", str(solution_dir), "-d", definition,
            "--json", str(json_path), "--device", "cpu" if lease is None or lease.device_type == "cpu" else "cuda"]
    if quick:
        argv.append("--quick")
    code = run_child(argv, device_env(lease), timeout_s, out_dir / "profile.log")
    if json_path.is_file():
        data = json.loads(json_path.read_text())
        text = render(data)
        (out_dir / "profile.md").write_text(text)
        return data["tool"], text
    tail = (out_dir / "profile.log").read_text(errors="replace")[-800:] if (out_dir / "profile.log").exists() else ""
    return "none", f"# Profile failed (exit {code})\n\n```\n{tail}\n```\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelwright.workflow.profiler",
                                 description="Bottleneck summary of a solution folder.")
    ap.add_argument("solution", type=Path)
    ap.add_argument("-d", "--definition", default=None,
                    help="definition name or alias (default: the manifest's definition)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--tool", default="auto", choices=["auto", "ncu", "torch"])
    ap.add_argument("--json", type=Path, default=None, help="also write the raw data here")
    ap.add_argument("--target", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if not (args.solution / "manifest.json").is_file():
        print(f"error: {args.solution}: not a solution folder (no manifest.json)", file=sys.stderr)
        return 2
    if args.definition is None:
        args.definition, problem = _manifest_definition(args.solution)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    if args.target:
        _target(args.solution, args.definition, args.quick, args.target)
        return 0
    problem = _mismatch(args.solution, args.definition)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        data = profile_local(args.solution, args.definition, args.quick, device, args.tool)
    except Exception as exc:   # the solution under study failed to build or run: one line, not a traceback
        print(f"error: {args.solution} failed in the profiler: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
              file=sys.stderr)
        return 1
    if data["tool"] == "ncu":
        for r in data["regimes"]:
            try:
                r["kernels"] = _ncu(args.solution.resolve(), args.definition, args.quick, r["workload"], 900)
            except Exception as exc:  # ncu missing permissions, timeouts: keep the latency part
                r["ncu_error"] = str(exc)[:300]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=1, default=str))
    print(render(data))
    return 0


if __name__ == "__main__":
    from kernelwright.workflow.evaljob import exit_now

    exit_now(main())
