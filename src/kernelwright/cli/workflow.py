"""Commands of the optimisation workflow (registered on the main app by ``register``).

    kernelwright optimize --definition NAME --agents CONFIG     start a run (a team of agents, the gate promotes)
    kernelwright optimize --demo                                the CPU demo with scripted agents (no API keys)
    kernelwright optimize --resume RUN                          continue a run after a stop, a crash or a kill
    kernelwright run status|pause|resume|stop RUN               the operator console (works while a run is active)
    kernelwright run redirect RUN "TEXT" [--reference R]        a new direction for the Planner
    kernelwright run note RUN "TEXT"                            a note for the Planner
    kernelwright run invalidate RUN CANDIDATE                   drop a candidate from best
    kernelwright run report RUN                                 HTML report (speedup over time/tokens, lineage, usage)
    kernelwright profile SOLUTION -d NAME                       bottleneck summary (ncu or torch profiler)
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from kernelwright.cli.common import UsageError, fail, one_line_errors

console = Console()
run_app = typer.Typer(help="Operator console of an optimisation run (status, pause, resume, stop, redirect, note, "
                           "invalidate, report). Works while the run is active.", no_args_is_help=True)


def _workflow_errors(fn):
    """Workflow errors (config, state, console, agents) as one line and exit code 2."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from kernelwright.agents import AgentError
        from kernelwright.workflow.config import ConfigError
        from kernelwright.workflow.console import ConsoleError
        from kernelwright.workflow.loop import OrchestratorError
        from kernelwright.workflow.state import StateError
        from kernelwright.workflow.worktrees import GitError

        try:
            return fn(*args, **kwargs)
        except (ConfigError, ConsoleError, StateError, OrchestratorError, GitError, AgentError) as exc:
            fail(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)

    return one_line_errors(wrapper)


def optimize_cmd(
    definition: Optional[str] = typer.Option(None, "--definition", "-d", help="Definition name or alias (overrides the config's)."),
    agents: Optional[Path] = typer.Option(None, "--agents", "-a", help="Agents/run config (TOML); examples in src/kernelwright/workflow/examples/."),
    solution: Optional[Path] = typer.Option(None, "--solution", "-s", help="Starting solution folder (default: the shipped one)."),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", "-o", help="Run folder to create (default kw-runs/<definition>-<time>)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue this run folder (after stop, crash or kill)."),
    demo: bool = typer.Option(False, "--demo", help="CPU demo: scripted agents improve a slow Triton RMSNorm (a few minutes, no API keys)."),
    device: Optional[str] = typer.Option(None, "--device", help="cuda or cpu (default: the run config's [run] device, cuda unless it says otherwise; cpu with --demo)."),
    devices: Optional[int] = typer.Option(None, "--devices", help="Number of GPUs (CPU: pseudo-devices) to lease."),
    coders: Optional[int] = typer.Option(None, "--coders", help="Number of coder agents."),
    quick: Optional[bool] = typer.Option(None, "--quick/--full", help="Reduced sizes (CPU demos)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Budget: tokens (all agents)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Budget: USD (as reported by the clients)."),
    max_wall: Optional[float] = typer.Option(None, "--max-wall", help="Budget: orchestrator seconds, across resumes."),
    max_attempts: Optional[int] = typer.Option(None, "--max-attempts", help="Budget: coder attempts."),
    max_cycles: Optional[int] = typer.Option(None, "--max-cycles", help="Budget: planning cycles."),
    no_wait: bool = typer.Option(False, "--no-wait", help="Exit (status 3) instead of waiting when the run needs the operator or is paused."),
) -> None:
    """Run a team of coding agents that generate, debug, profile and optimise a kernel; only the gate promotes.

    The loop is a deterministic state machine (kernelwright.workflow): Planner -> Coders (one bounded
    attempt each, in their own git worktrees, edit surface checked) -> the gate's check -> Synthesizer ->
    the gate's final evaluation (hidden split included) -> promotion -> Profiler.  State lives in
    RUN/state.sqlite; steer the run with `kernelwright run ...`, report with `kernelwright run report RUN`.
    Exit codes: 0 finished or stopped, 3 waiting for the operator or paused (--no-wait), 130 interrupted.
    """
    from kernelwright.workflow.config import load_config_file, parse_config
    from kernelwright.workflow.loop import Orchestrator
    from kernelwright.workflow.runs import create_run, default_run_dir
    from kernelwright.workflow.state import State

    overrides = {"definition": definition, "solution": str(solution.resolve()) if solution else None,
                 "device": device, "devices": devices, "coders": coders, "quick": quick, "max_tokens": max_tokens,
                 "max_cost_usd": max_cost, "max_wall_s": max_wall, "max_attempts": max_attempts,
                 "max_cycles": max_cycles, "wait_for_operator": False if no_wait else None}
    if resume is not None:
        if demo or agents or definition or solution:
            raise UsageError("--resume takes the run's own config; drop --demo/--agents/--definition/--solution")
        state = State(resume)
        budget_over = {k: v for k, v in overrides.items() if v is not None and k.startswith("max_")}
        if budget_over or no_wait:
            from kernelwright.workflow.config import RunConfig

            cfg = RunConfig.model_validate(state.config())
            cfg = cfg.model_copy(update={"budget": cfg.budget.model_copy(update=budget_over),
                                         **({"wait_for_operator": False} if no_wait else {})})
            with state.tx() as tx:
                tx.execute("UPDATE runs SET config_json=?", (cfg.model_dump_json(),))
        target = Path(resume)
    else:
        if demo:
            from kernelwright.workflow.demo import DEMO_CONFIG

            data = load_config_file(DEMO_CONFIG)
        elif agents is not None:
            data = load_config_file(agents)
        else:
            raise UsageError("give --agents CONFIG (a TOML file; see kernelwright/workflow/examples/), or --demo")
        if not definition and not (data.get("run") or {}).get("definition") and not data.get("definition"):
            raise UsageError("no definition: pass --definition NAME or set [run] definition in the config")
        cfg = parse_config(data, overrides)
        from kernelwright import definitions
        from kernelwright.workflow.loop import build_backends, check_backends

        definitions.resolve(cfg.definition)      # an unknown definition is one line, before the agents' binaries

        check_backends(build_backends(cfg))      # before anything is created: a missing client is one line
        target = run_dir or default_run_dir(cfg.definition)
        create_run(target, cfg)
        console.print(f"created run [bold]{target}[/bold] ({cfg.definition}, {cfg.coders} coder(s), "
                      f"{cfg.device} x{len(cfg.device_names())})")
    orch = Orchestrator(target, log=lambda m: console.print(m))
    console.print(f"steer it with: kernelwright run status|pause|resume|stop|redirect|note|invalidate {target}")
    code = orch.run()
    console.print(f"report: kernelwright run report {target}")
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)  # running steps live in threads; the run resumes without them
    raise typer.Exit(code)


@run_app.command("status")
@_workflow_errors
def run_status(run: Path = typer.Argument(..., help="Run folder.")) -> None:
    """Show the run: best, budget use, the current cycle, leases (and who waits for a device), directions, events."""
    from kernelwright.workflow.console import open_run, render_status, status

    render_status(status(open_run(run)), console)


def _control(run: Path, command: str) -> None:
    from kernelwright.workflow.console import open_run, set_control

    console.print(set_control(open_run(run), command))


@run_app.command("pause")
@_workflow_errors
def run_pause(run: Path = typer.Argument(..., help="Run folder.")) -> None:
    """Start no new steps (running ones finish)."""
    _control(run, "pause")


@run_app.command("resume")
@_workflow_errors
def run_resume(run: Path = typer.Argument(..., help="Run folder.")) -> None:
    """Undo pause, and release a run that waits for the operator (to restart a dead process: optimize --resume)."""
    _control(run, "resume")


@run_app.command("stop")
@_workflow_errors
def run_stop(run: Path = typer.Argument(..., help="Run folder.")) -> None:
    """Finish the running steps, then exit (the run stays resumable)."""
    _control(run, "stop")


@run_app.command("redirect")
@_workflow_errors
def run_redirect(run: Path = typer.Argument(..., help="Run folder."),
                 text: str = typer.Argument(..., help="The new direction, in words, for the Planner."),
                 reference: Optional[str] = typer.Option(None, "--reference", "-r", help="A reference (URL, paper, file) for it."),
                 name: Optional[str] = typer.Option(None, "--name", help="Direction slug (default derived from the text)."),
                 reopen: Optional[str] = typer.Option(None, "--reopen", help="Reopen this escalated direction with the text as new context.")) -> None:
    """Give the Planner a new direction or reference (releases a run waiting for the operator)."""
    from kernelwright.workflow.console import open_run, redirect

    console.print(redirect(open_run(run), text, reference=reference, name=name, reopen=reopen))


@run_app.command("note")
@_workflow_errors
def run_note(run: Path = typer.Argument(..., help="Run folder."),
             text: str = typer.Argument(..., help="The note.")) -> None:
    """Add a note every later Planner prompt shows."""
    from kernelwright.workflow.console import note, open_run

    console.print(note(open_run(run), text))


@run_app.command("invalidate")
@_workflow_errors
def run_invalidate(run: Path = typer.Argument(..., help="Run folder."),
                   candidate: str = typer.Argument(..., help="Candidate id, e.g. c4."),
                   reason: str = typer.Option("", "--reason", help="Why (recorded).")) -> None:
    """Drop a candidate from best; the best falls back to the latest valid promotion."""
    from kernelwright.workflow.console import invalidate, open_run

    console.print(invalidate(open_run(run), candidate, reason))


@run_app.command("report")
@_workflow_errors
def run_report(run: Path = typer.Argument(..., help="Run folder."),
               out: Optional[Path] = typer.Option(None, "--out", "-o", help="HTML file (default RUN/report.html).")) -> None:
    """Write the run's HTML report: best speedup over time and tokens, per-workload latency, lineage, usage by role."""
    from kernelwright.workflow.report import write_run_report

    console.print(f"wrote {write_run_report(run, out)}")


def profile_cmd(solution: Path = typer.Argument(..., help="Solution folder."),
                definition: Optional[str] = typer.Option(None, "--definition", "-d", help="Definition name or alias (default: the manifest's definition)."),
                quick: bool = typer.Option(False, "--quick", help="Reduced sizes."),
                device: Optional[str] = typer.Option(None, "--device", help="cuda or cpu (default: cuda if present)."),
                tool: str = typer.Option("auto", "--tool", help="auto, ncu or torch.")) -> None:
    """Bottleneck summary of a solution per regime: latency, roofline fraction, ncu (or torch profiler) kernels."""
    from kernelwright.workflow import profiler

    if not (Path(solution) / "manifest.json").is_file():
        raise UsageError(f"{solution}: not a solution folder (no manifest.json)")
    if tool not in ("auto", "ncu", "torch"):
        raise UsageError("--tool must be auto, ncu or torch")
    if tool == "ncu" and shutil.which("ncu") is None:
        raise UsageError("--tool ncu: no `ncu` on PATH (Nsight Compute); use --tool torch or auto")
    argv: List[str] = [str(solution), "--tool", tool] + (["-d", definition] if definition else []) + (["--quick"] if quick else [])
    if device:
        argv += ["--device", device]
    raise typer.Exit(profiler.main(argv))


def register(app: typer.Typer) -> None:
    """Add ``optimize``, ``run ...`` and ``profile`` to the main app."""
    app.command("optimize")(_workflow_errors(optimize_cmd))
    app.command("profile")(one_line_errors(profile_cmd))
    app.add_typer(run_app, name="run")
