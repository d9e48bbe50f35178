"""kernelwright command line.

    kernelwright defs                         list definitions and workload counts
    kernelwright bench                        shipped solutions on all contest workloads (GPU)
    kernelwright bench --device cpu --quick   the same pipeline at reduced sizes on CPU
    kernelwright eval SOLUTION -d NAME        evaluate any solution folder or Solution JSON
    kernelwright device-info [--measure]      roofline ceilings of this GPU
    kernelwright report RESULTS               HTML report with plots next to summary.json
    kernelwright redteam                      the reward-hack catalogue against the gate
    kernelwright optimize / run / profile     the agent team and its operator console
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from kernelwright.cli import helpstyle
from kernelwright.cli.common import UsageError, command_line, fail, one_line_errors, require_device, write_json
from kernelwright.cli.gate_options import GATE_OPTIONS, GateOptions, with_gate_options
from kernelwright.selection import check_selectors, load_solution, pick_workloads

helpstyle.install()   # help without typer's <bool>/<list[str]> placeholders
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode="rich",
                  help="Correctness-gated kernel workbench for LLM-serving operators (FlashInfer-Trace compatible).")
console = Console(width=None if Console().is_terminal else 160)


@app.command("defs")
@one_line_errors
def defs_cmd() -> None:
    """List the built-in definitions with their workload counts, tolerances (contest rule and
    strict rule, docs/gate.md) and checkers."""
    from rich.table import Table

    from kernelwright import definitions

    table = Table(title="built-in definitions", title_justify="left")
    for col in ("definition", "alias", "op_type", "workloads", "contest (atol/rtol/ratio)",
                "strict (rel-L2 / row rel-L2)", "checker"):
        table.add_column(col, overflow="fold")   # the full name, copyable, however narrow the terminal
    for b in definitions.all_builtins():
        tol = b.tolerance
        demo = " (demo)" if "demo" in b.definition.tags else ""
        strict = "—" if tol.strict is None else (
            f"{tol.strict.max_rel_l2:g} / " + ("—" if tol.strict.max_row_rel_l2 is None else f"{tol.strict.max_row_rel_l2:g}"))
        table.add_row(b.name + demo, b.short, b.definition.op_type, str(len(b.public_workloads())),
                      f"{tol.atol:g} / {tol.rtol:g} / {tol.required_matched_ratio:g}", strict, b.checker)
    console.print(table)


def _targets(names: Optional[List[str]], quick: bool, workload_file: Optional[Path], trace_set: Optional[Path],
             include_demo: bool = False):
    """What a bench runs: each ``-d`` (a name, a definition file, a TraceSet folder read only) or
    every definition of ``--trace-set`` (those named by ``-d`` there), else the contest three."""
    from kernelwright import definitions
    from kernelwright.cli import sources

    if trace_set is not None:
        ts = sources.load_trace_set(trace_set)
        return [sources.from_trace_set(ts, n, quick, workload_file) for n in sources.trace_set_names(ts, names)]
    if not names:
        chosen = definitions.all_builtins(include_demo=include_demo)
        return [sources.definition_option(b.name, quick, workload_file) for b in chosen]
    targets = []
    for n in names:
        if Path(n).is_dir():
            ts = sources.load_trace_set(Path(n))
            targets += [sources.from_trace_set(ts, d, quick, workload_file, receive=False)
                        for d in sources.trace_set_names(ts, None)]
        else:
            targets.append(sources.definition_option(n, quick, workload_file))
    return targets


def verdict_meta(builtins, cfg) -> dict:
    """``summary.json`` ``meta.verdict``: which rule judged (``contest+strict`` or ``contest``)
    and each definition's thresholds."""
    per = {}
    for b in builtins:
        tol = cfg.tolerance_for(b.tolerance.contest_only() if cfg.contest_rule else b.tolerance)
        strict = tol.strict
        per[b.name] = {"rule": tol.rule,
                       "contest": {"atol": tol.atol, "rtol": tol.rtol, "required_matched_ratio": tol.required_matched_ratio},
                       "strict": None if strict is None else {"max_rel_l2": strict.max_rel_l2,
                                                              "max_row_rel_l2": strict.max_row_rel_l2,
                                                              "row_axes": strict.row_axes}}
    return {"contest_rule_only": cfg.contest_rule, "definitions": per}


# -- options eval and bench share ----------------------------------------------------------
def _opt_workload_file():
    return typer.Option(None, "--workload-file", metavar="FILE.jsonl",
                        help="FlashInfer-Bench workload lines (JSONL) to run instead of the definition's own; "
                             "safetensors paths are relative to the TraceSet the file is in, else to its folder. "
                             "(-w/--workloads selects among them by uuid prefix or index.)")


def _opt_trace_set():
    return typer.Option(None, "--trace-set", metavar="DIR",
                        help="A FlashInfer-Bench TraceSet: its definitions and workloads are evaluated, and the "
                             "traces (traces/<op_type>/<definition>.jsonl) and solution entries are added to it.")


def _run_plans(plans, cfg, out: Path, title: str, timeouts=None, suffix: str = "",
               pool: Optional[int] = None, ray: Optional[str] = None):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from kernelwright.gate.bench import run_bench

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        task = progress.add_task(title, total=None)

        plain = not console.is_terminal   # output to a file or a pipe: no live bar, one line per evaluation

        def hook(desc: str, done: int, total: int) -> None:
            progress.update(task, description=desc[:70], completed=done, total=total)
            if plain:
                console.print(f"{done}/{total} {desc}", highlight=False, soft_wrap=True)

        if pool is not None or ray:
            from kernelwright.cluster import run_bench_distributed

            return run_bench_distributed(plans, cfg, out, backend="ray" if ray else "local",
                                         devices=(pool or None), ray_address=ray, timeouts=timeouts,
                                         progress=hook, trace_file_suffix=suffix)
        return run_bench(plans, cfg, out, timeouts=timeouts, progress=hook, trace_file_suffix=suffix)


def _finish(result, plans, cfg, out: Path, extra_meta=None):
    from kernelwright.gate.environment import environment, source_revision
    from kernelwright.report.summary import summarize
    from kernelwright.report.tables import render_summary

    roles = {c.solution.name: {"label": c.label, "role": c.role} for p in plans for c in p.candidates}
    builtins = {p.builtin.name: p.builtin for p in plans}
    meta = {"command": command_line(), "date": _dt.datetime.now().isoformat(timespec="seconds"),
            "device": cfg.device, "environment": environment(cfg.device).model_dump(),
            "config": cfg.__dict__, "seconds": round(result.seconds, 1),
            "skipped": {c.label: c.skip_reason for p in plans for c in p.candidates if c.skip_reason},
            "code": source_revision(),
            "solutions": {c.solution.name: {"content_hash": c.solution.content_hash(), "label": c.label,
                                            "role": c.role, "definition": c.solution.definition}
                          for p in plans for c in p.candidates},
            "verdict": verdict_meta(builtins.values(), cfg)}
    meta.update(extra_meta or {})
    summary = summarize(result.traces, builtins, roles, result.lower_bounds, meta)
    write_json(out / "summary.json", summary)
    render_summary(summary, console)
    for label, why in meta["skipped"].items():
        console.print(f"[yellow]skipped[/yellow] {label}: {why}")
    console.print(f"traces and summary in [bold]{out}[/bold]  (HTML: kernelwright report {out})")
    return summary


def _default_out(device: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("kw-results") / f"bench-{device}-{stamp}"


def baselines_epilog() -> str:
    """The ``bench --help`` epilog: every baseline by key and label (from the manifests)."""
    from rich.markup import escape

    try:
        from kernelwright.baselines import catalogue

        entries = catalogue()
    except Exception as exc:   # a broken manifest must not break --help
        return f"Baselines: not listed ({type(exc).__name__}: {exc})."
    short = {b.name: b.short for b in _all_definitions()}
    lines = [f"  {escape(key)} ({escape(short.get(definition, definition))}): {escape(label)}"
             for key, label, definition in entries]
    return "Baselines that --baselines runs, by key (definition): label\n" + "\n".join(lines)


def _all_definitions():
    from kernelwright import definitions

    return definitions.all_builtins()


@app.command("bench", epilog=baselines_epilog())
@one_line_errors
@with_gate_options(fast_unsafe_help="Turn the anti-hack guards off (fresh inputs per iteration, sampled checks, "
                                    "determinism, provenance): only to measure what the guards cost.")
def bench_cmd(
    definition: Optional[List[str]] = typer.Option(None, "--definition", "-d", help="Definition (repeatable): a name or alias, a FlashInfer-Bench definition JSON (with --workload-file) or a TraceSet folder (read only); with --trace-set, definitions of that set.  Default: the three contest definitions, or every definition of --trace-set that has workloads."),
    solution: Optional[List[Path]] = typer.Option(None, "--solution", "-s", help="Extra solution folder or Solution JSON to include (repeatable)."),
    baselines: bool = typer.Option(False, "--baselines", help="Also run the baseline kernels users run today (FlashInfer, DeepGEMM, FlashMLA, vLLM's Triton MoE; listed below), interleaved on the same inputs."),
    baseline_keys: Optional[List[str]] = typer.Option(None, "--baseline", help="Only this baseline (a key listed below, e.g. moe_vllm_triton; repeatable); implies --baselines."),
    no_shipped: bool = typer.Option(False, "--no-shipped", help="Leave out kernelwright's shipped solutions."),
    device: str = typer.Option("cuda", "--device", help="cuda, or cpu: Triton's interpreter, verdicts without GPU timings."),
    quick: bool = typer.Option(False, "--quick", help="Reduced sizes and iterations (CPU demo: Triton through TRITON_INTERPRET=1)."),
    workloads: Optional[List[str]] = typer.Option(None, "--workloads", "-w", help="Workload uuid prefixes or indices (comma-separated)."),
    workload_file: Optional[Path] = _opt_workload_file(),
    trace_set: Optional[Path] = _opt_trace_set(),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N workloads per definition."),
    sweep: bool = typer.Option(False, "--sweep", help="The serving-envelope workloads instead of the contest ones: indexer batch 1-64 x context 4K-128K (30), attention T = 1-128 of one request at 1K-128K context (27), moe T = 1, 2, 4, ..., 16384 at expert offsets 0 and 224 (30)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Results folder (default kw-results/bench-<device>-<time>)."),
    gate: GateOptions = GATE_OPTIONS,
    pool: Optional[int] = typer.Option(None, "--pool", min=0, help="Evaluate on a pool of one worker per GPU: N GPUs, 0 = all visible (timing stays one job per GPU)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the jobs on a Ray cluster: auto, host:6379, ray://host:10001 or local (needs the ray extra; falls back to the local pool without it)."),
) -> None:
    """Evaluate solutions on every workload of each definition and print one table per definition.

    With no arguments, on a CUDA machine: the shipped solutions on all 170 contest workloads,
    against the PyTorch references.  Traces (FlashInfer-Trace JSONL) and summary.json go to --out;
    with --trace-set also into the TraceSet (its own solutions for each definition run too).
    """
    from kernelwright.gate.bench import BenchPlan, Candidate
    from kernelwright import definitions
    from kernelwright.solutions import shipped_solutions

    if baseline_keys:
        from kernelwright.baselines import get_baseline

        try:
            for key in baseline_keys:
                get_baseline(key)
        except KeyError as exc:
            raise UsageError(f"--baseline: {exc.args[0]}") from None
    device = device if ray else require_device(device)  # a Ray driver needs no GPU of its own
    targets = _targets(definition, quick, workload_file, trace_set, include_demo=bool(definition))
    cfg = gate.config(device, quick)
    extra = [(path, load_solution(path)) for path in solution or []]
    plans, receivers = [], {}
    for target in targets:
        b = target.builtin
        base_name = b.base_name
        if target.workloads == []:
            console.print(f"[yellow]no workload of {b.name} in {workload_file or trace_set}; skipped[/yellow]")
            continue
        cands = []
        if not no_shipped:
            cands += [Candidate(s, s.name) for s in shipped_solutions(base_name)]
        own = [s for s in (target.trace_set.solutions.values() if target.trace_set else [])
               if definitions.base_name(s.definition) == base_name]
        for path, sol in [(None, s) for s in own] + extra:
            if definitions.base_name(sol.definition) != base_name:
                continue
            taken = next((c for c in cands if c.solution.name == sol.name), None)
            if taken is not None:
                if path is None and taken.solution.content_hash() == sol.content_hash():
                    continue   # the TraceSet holds a copy of a shipped solution
                raise UsageError(f"{path or 'the TraceSet'}: solution name {sol.name!r} is already taken by another "
                                 "solution in this run (a shipped one?): give it its own name in manifest.json")
            if target.trace_set is not None and target.trace_set.solution_conflict(sol):
                raise UsageError(target.trace_set.solution_conflict(sol))
            cands.append(Candidate(sol, sol.name))
        if baselines or baseline_keys:
            found = _baseline_candidates(base_name, device, baseline_keys)
            if not found:
                console.print(f"[yellow]{b.name}: no baseline is registered for it (the list: bench --help)[/yellow]")
            cands += found
        if not cands:
            console.print(f"[yellow]no solution for {b.name}; skipped[/yellow]")
            continue
        plans.append(BenchPlan(b, pick_workloads(b, workloads, limit, sweep=sweep, strict=len(targets) == 1,
                                                 available=target.workloads), cands))
        if target.trace_set is not None:
            receivers[b.name] = target.trace_set
    if not plans:
        raise UsageError("nothing to run: no solution matches the selected definitions")
    check_selectors(workloads, [p.workloads for p in plans])
    plans = [p for p in plans if p.workloads]
    out = out or _default_out(device)
    result = _run_plans(plans, cfg, out, "bench", timeouts=gate.timeouts(), pool=pool, ray=ray)
    _finish(result, plans, cfg, out, extra_meta={"per_call_timeout_s": gate.timeout})
    _to_trace_sets(receivers, plans, result)


def _to_trace_sets(receivers, plans, result) -> None:
    """Append each plan's traces (and solutions, and a quick variant's definition) to the TraceSet
    it came from (``--trace-set``)."""
    from kernelwright.report.traceset import append_run

    for ts in {id(t): t for t in receivers.values()}.values():
        mine = [p for p in plans if receivers.get(p.builtin.name) is ts]
        done = append_run(ts, mine, {p.builtin.name: result.traces.get(p.builtin.name, []) for p in mine})
        console.print(f"TraceSet {ts.root}: {done.traces} traces, {done.solutions} new solution(s), "
                      f"{done.definitions} new definition(s) added")
        for line in done.missing:
            console.print(f"[yellow]{line}[/yellow]", soft_wrap=True)


def _baseline_candidates(definition_name: str, device: str, keys: Optional[List[str]] = None):
    """The definition's baselines as trusted candidates (only ``keys`` when given), each with its
    one-line skip reason when it cannot run here."""
    from kernelwright.gate.bench import Candidate

    try:
        from kernelwright.baselines import all_baselines
    except ImportError:
        return []
    cands = []
    for entry in all_baselines(definition_name):
        if keys and entry.key not in keys:
            continue
        why = entry.availability() if device != "cpu" else "baselines need a CUDA device"
        role = "lower_bound" if entry.kind == "lower_bound" else "baseline"
        cands.append(Candidate(entry.solution, entry.label, role=role, trusted=True, prepare=entry.prepare_symbol,
                               requires_kernel=False, skip_reason=why))
    return cands


@app.command("eval")
@one_line_errors
@with_gate_options(fast_unsafe_help="Guards off (measurement of their cost only).")
def eval_cmd(
    solution: Path = typer.Argument(..., help="Solution folder (manifest.json + sources) or Solution JSON."),
    definition: Optional[str] = typer.Option(None, "--definition", "-d", help="Where the solution's definition lives: a name, an alias, package.module:ATTRIBUTE, a FlashInfer-Bench definition JSON (with --workload-file) or a TraceSet folder (read only); default: the manifest's definition, which it must match."),
    workloads: Optional[List[str]] = typer.Option(None, "--workloads", "-w", help="Workload uuid prefixes or 0-based indices (comma-separated)."),
    workload_file: Optional[Path] = _opt_workload_file(),
    trace_set: Optional[Path] = _opt_trace_set(),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N workloads."),
    final: bool = typer.Option(False, "--final", help="Also run the hidden split (held-out workloads); only a final evaluation can promote a solution."),
    device: str = typer.Option("cuda", "--device", help="cuda, or cpu: Triton's interpreter, verdicts without GPU timings."),
    quick: bool = typer.Option(False, "--quick", help="Reduced sizes and iterations (CPU: Triton through TRITON_INTERPRET=1)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Results folder (default kw-results/eval-<solution>-<time>)."),
    gate: GateOptions = GATE_OPTIONS,
) -> None:
    """Evaluate one solution under the gate: a summary table, one line per failed workload, exit 1
    when any workload fails."""
    from kernelwright.gate.bench import BenchPlan, Candidate
    from kernelwright.gate.hidden import held_out_workloads, hidden_salt

    sol = load_solution(solution)
    target = _eval_target(sol, definition, workload_file, trace_set, quick)
    builtin = target.builtin
    problem = builtin.foreign_solution(sol)
    if problem:
        raise UsageError(problem)
    if target.workloads == []:
        raise UsageError(f"{workload_file or trace_set}: no workload of {builtin.base_name}")
    if target.trace_set is not None and target.trace_set.solution_conflict(sol):
        raise UsageError(target.trace_set.solution_conflict(sol))
    if final and builtin.origin == "file":
        raise UsageError(f"--final: {builtin.base_name} comes from a definition file, which has no hidden split")
    device = require_device(device)
    cfg = gate.config(device, quick)
    out = out or Path("kw-results") / f"eval-{sol.name}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    plans = [BenchPlan(builtin, pick_workloads(builtin, workloads, limit, available=target.workloads),
                       [Candidate(sol, sol.name)])]
    result = _run_plans(plans, cfg, out, "eval", timeouts=gate.timeouts())
    summary = _finish(result, plans, cfg, out, extra_meta={"per_call_timeout_s": gate.timeout})
    if target.trace_set is not None:
        _to_trace_sets({builtin.name: target.trace_set}, plans, result)
    ok = all(s["all_passed"] for d in summary["definitions"].values() for s in d["solutions"].values())
    if final:
        from dataclasses import replace

        hidden_cfg = replace(cfg, split="hidden", salt=hidden_salt())
        hidden = [BenchPlan(builtin, held_out_workloads(builtin, hidden_cfg.salt), [Candidate(sol, sol.name)])]
        hres = _run_plans(hidden, hidden_cfg, out / "hidden", "hidden split", timeouts=gate.timeouts())
        traces = hres.traces.get(builtin.name, [])
        passed = sum(1 for t in traces if t.trusted_pass)
        console.print(f"hidden split: {passed}/{len(traces)} workloads passed (shapes not shown)")
        from kernelwright.gate.environment import source_revision

        write_json(out / "final.json", {"code": source_revision(), "solution": sol.name,
                                        "content_hash": sol.content_hash(),
                                        "rule": (builtin.with_contest_rule() if gate.contest_rule else builtin).tolerance.rule,
                                        "public_passed": ok, "hidden_passed": passed, "hidden_total": len(traces),
                                        "final_verdict": "PASSED" if ok and passed == len(traces) else "FAILED"})
        ok = ok and passed == len(traces)
    if not ok:
        raise typer.Exit(1)


def _eval_target(sol, definition: Optional[str], workload_file: Optional[Path], trace_set: Optional[Path], quick: bool):
    """The definition and workloads ``eval`` judges ``sol`` on (see ``cli/sources.py``)."""
    from kernelwright.cli import sources

    if trace_set is not None:
        return sources.from_trace_set(sources.load_trace_set(trace_set), definition or sol.definition, quick,
                                      workload_file)
    if definition is not None and Path(definition).is_dir():
        return sources.from_trace_set(sources.load_trace_set(Path(definition)), sol.definition, quick, workload_file,
                                      receive=False)
    return sources.definition_option(definition or sol.definition, quick, workload_file)


@app.command("export-traceset")
@one_line_errors
def export_traceset_cmd(
    results: Path = typer.Argument(..., help="A results folder of bench or eval (traces/*.jsonl)."),
    dest: Path = typer.Argument(..., help="The TraceSet folder to create, or to add to when it is one."),
) -> None:
    """Turn a results folder into a FlashInfer-Bench TraceSet: definitions/, workloads/, solutions/,
    traces/<op_type>/<definition>.jsonl, and the safetensors files the workloads name."""
    from kernelwright.report.traceset import export_results

    if Path(dest).exists() and not Path(dest).is_dir():
        raise UsageError(f"{dest}: not a folder (the TraceSet destination is a folder, new or a TraceSet)")
    done = export_results(Path(results), Path(dest))
    console.print(f"TraceSet {dest}: {done.traces} traces, {done.workloads} workloads, {done.solutions} solutions, "
                  f"{done.definitions} definitions, {done.blobs} blob file(s) written")
    for line in done.missing:
        console.print(f"[yellow]{line}[/yellow]", soft_wrap=True)


@app.command("device-info")
@one_line_errors
def device_info_cmd(measure: bool = typer.Option(False, "--measure", help="Measure copy bandwidth and matmul rates now and cache them."),
                    device: str = typer.Option("cuda", "--device", help="The CUDA device to describe (cuda, cuda:1, ...).")) -> None:
    """Show the roofline ceilings of this GPU (measured copy bandwidth, BF16 and FP8 matmul rates)."""
    import torch

    from kernelwright.gate.device_info import load_ceilings, measure_ceilings

    if not device.startswith("cuda"):
        raise UsageError("device-info describes a CUDA device: use --device cuda (or cuda:N)")
    require_device(device, hint="device-info needs a GPU")
    dev = torch.device(device)
    info = measure_ceilings(dev) if measure else load_ceilings(dev)
    if info is None:
        fail(f"no ceilings known for {torch.cuda.get_device_name(dev)}; run kernelwright device-info --measure", 1)
    m, p = info["measured"], info["peak"]
    console.print(f"[bold]{info.get('name', torch.cuda.get_device_name(dev))}[/bold]  ({info['source']})")
    console.print(f"  copy bandwidth  {m['copy_bandwidth_Bps'] / 1e12:6.2f} TB/s   (peak {p['copy_bandwidth_Bps'] / 1e12:.2f})")
    console.print(f"  BF16 matmul     {m['bf16_flops'] / 1e12:6.0f} TFLOP/s (peak {p['bf16_flops'] / 1e12:.0f})")
    peak_fp8 = f"(peak {p['fp8_flops'] / 1e12:.0f})" if "fp8_flops" in p else "(no datasheet peak)"
    if "fp8_flops" in m:
        console.print(f"  FP8 matmul      {m['fp8_flops'] / 1e12:6.0f} TFLOP/s {peak_fp8}")
    else:
        console.print(f"  FP8 matmul      not measured {peak_fp8}: {m.get('fp8_flops_unmeasured', 'no value')}; "
                      "FP8 roofline floors have no FLOP term")
    if "launch_latency_s" in m:
        console.print(f"  one launch      {m['launch_latency_s'] * 1e6:6.1f} µs device time of one trivial kernel "
                      "(stream held while enqueued; the floor of any call)")


@app.command("report")
@one_line_errors
def report_cmd(results: List[Path] = typer.Argument(..., help="Results folder(s) with summary.json (from bench or eval), or summary.json files."),
               out: Optional[Path] = typer.Option(None, "--out", "-o", help="HTML file (default RESULTS/report.html; one results folder only)."),
               markdown: bool = typer.Option(False, "--markdown", help="Print the README's Markdown results table of every summary given, instead of writing HTML."),
               regimes: bool = typer.Option(False, "--regimes", help="With --markdown: one row per solution and regime (latency, achieved TB/s and TFLOP/s, × reference)."),
               workloads: Optional[str] = typer.Option(None, "--workloads", metavar="DEFINITION", help="Print one Markdown row per workload of this definition, merged over the summaries given: ours, the roofline floor, every other candidate and its ratio to ours."),
               ours: Optional[str] = typer.Option(None, "--ours", help="With --workloads: the solution the ratios are taken to (default: the definition's shipped solution).")) -> None:
    """Write an HTML page with latency and roofline plots for a results folder, or print Markdown tables."""
    if regimes and not markdown:
        raise UsageError("--regimes needs --markdown")
    if ours and not workloads:
        raise UsageError("--ours needs --workloads")
    if markdown or workloads:
        from kernelwright.report.markdown import regime_table, results_table, summary_paths, workload_table

        paths = summary_paths(results)
        if workloads:
            print(workload_table(paths, workloads, ours))
        else:
            print(regime_table(paths) if regimes else results_table(paths))
        return
    if len(results) != 1:
        raise UsageError("the HTML report takes one results folder (several only with --markdown)")
    from kernelwright.report.html import write_report

    path = write_report(Path(results[0]), out)
    console.print(f"wrote {path}")


solutions_app = typer.Typer(help="Shipped solutions: list and export as FlashInfer-Bench Solution JSON.")
app.add_typer(solutions_app, name="solutions")


@solutions_app.command("list")
@one_line_errors
def solutions_list() -> None:
    """List the shipped solutions, then the candidates (CPU-tested, waiting for their H200 measurement)."""
    from kernelwright.solutions import CANDIDATES_ROOT, candidate_solutions, shipped_solutions

    for s in shipped_solutions():
        n = len(s.sources)
        console.print(f"{s.name:40s} {s.definition}  ({s.spec.language.value}, {n} file{'' if n == 1 else 's'})")
    for s in candidate_solutions():
        console.print(f"{s.name:40s} {s.definition}  (candidate, not shipped: kernelwright bench -s <its folder in {CANDIDATES_ROOT}>)")


@solutions_app.command("export")
@one_line_errors
def solutions_export(out: Path = typer.Argument(..., help="Folder to write <definition>/<name>.json into.")) -> None:
    """Write every shipped solution as a FlashInfer-Bench Solution JSON."""
    from kernelwright.solutions import shipped_solutions
    from kernelwright.trace.jsonio import dump_json

    for s in shipped_solutions():
        path = out / s.definition / f"{s.name}.json"
        dump_json(s, path)
        console.print(f"wrote {path}")


from kernelwright.cli.redteam import redteam_cmd  # noqa: E402  (red-team suite: kernelwright redteam)

app.command("redteam")(redteam_cmd)


from kernelwright.cli.workflow import register as _register_workflow  # noqa: E402  (optimize, run ..., profile)

_register_workflow(app)


helpstyle.one_line_summaries(app)   # after every command is registered


def main() -> None:
    app()


if __name__ == "__main__":
    main()
