"""``kernelwright redteam``: run the adversarial catalogue and the canaries through the gate.

    kernelwright redteam --device cpu                    every CPU case + canaries (CUDA cases skipped)
    kernelwright redteam --device cuda --json out.json   everything, on a GPU
    kernelwright redteam --case cache_pointer --case frame_walk

Exit status: 0 when every case ends as expected (honest ones PASS, adversarial ones rejected
with one of their expected reasons) and no canary passes; 1 otherwise.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from kernelwright.cli.common import command_line, one_line_errors, require_device, write_json

console = Console()


def _cases_table(results) -> Table:
    from kernelwright.redteam.verdicts import SKIPPED

    table = Table(title="red-team cases", title_justify="left")
    for col in ("case", "class", "expected", "verdict", "reason", "ok?"):
        table.add_column(col, overflow="fold")
    for r in results:
        if r.verdict == SKIPPED:
            continue
        ok = "[green]ok[/green]" if r.ok else "[red]UNEXPECTED[/red]"
        reason = ", ".join(r.reasons) or "—"
        if r.case.min_latency_ms is not None and r.latency_ms is not None:
            reason += f" (measured {r.latency_ms:.1f} ms)"
        table.add_row(r.case.id, r.case.hack, r.case.expected_label, r.verdict, reason, ok)
    return table


def _canary_table(results) -> Table:
    from kernelwright.redteam.verdicts import PASS

    table = Table(title="canaries (must fail every definition)", title_justify="left")
    for col in ("definition", "canary", "verdict", "reason", "ok?"):
        table.add_column(col, overflow="fold")
    for r in results:
        if r.ok:
            ok = "[green]ok[/green]" if not r.detail else "[yellow]ok (weak)[/yellow]"
        else:
            ok = "[red]TOLERANCE BROKEN[/red]" if r.verdict == PASS else "[red]ERROR[/red]"
        table.add_row(r.definition, r.kind, r.verdict, ", ".join(r.reasons) or "—", ok)
    return table


class _Record:
    """The ``--json`` record, rewritten after every case and canary (``complete: false`` until the
    end), so that a run cut short by a timeout keeps what it finished."""

    def __init__(self, path: Optional[Path], device: str):
        self.path, self.device = path, device
        self.cases: list = []
        self.canaries: list = []
        self.head: dict = {}
        if path is not None:
            from kernelwright.gate.environment import environment, source_revision

            self.head = {"command": command_line(), "date": _dt.datetime.now().isoformat(timespec="seconds"),
                         "device": device, "environment": environment(device).model_dump(),
                         "code": source_revision()}

    def add_case(self, result) -> None:
        from kernelwright.redteam.verdicts import SKIPPED

        if result.verdict != SKIPPED:
            console.print(f"{'ok' if result.ok else 'UNEXPECTED'}  {result.case.id}: {result.verdict} "
                          f"{', '.join(result.reasons)}", markup=False, highlight=False)
        self.cases.append(result.as_dict())
        self.write(ok=None, complete=False)

    def add_canary(self, result) -> None:
        console.print(f"{'ok' if result.ok else 'UNEXPECTED'}  canary {result.definition} {result.kind}: "
                      f"{result.verdict}", markup=False, highlight=False)
        self.canaries.append(result.as_dict())
        self.write(ok=None, complete=False)

    def write(self, ok: Optional[bool], complete: bool) -> None:
        if self.path is None:
            return
        write_json(self.path, {**self.head, "ok": ok, "complete": complete,
                               "cases": self.cases, "canaries": self.canaries})


@one_line_errors
def redteam_cmd(
    device: Optional[str] = typer.Option(None, "--device", help="cpu or cuda (default: cuda when available)."),
    case: Optional[List[str]] = typer.Option(None, "--case", "-c", help="Only these case ids (repeatable)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write every result to this JSON file."),
    canaries: Optional[bool] = typer.Option(None, "--canaries/--no-canaries",
                                            help="Run the canaries (zeros, constant and the near misses of docs/gate.md section 2a) on every definition (default: on unless --case)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Cases evaluated at the same time, one worker each "
                                       "(default: 2 on CPU, 1 on CUDA, where parallel workers would share the GPU's timer)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for the cases' worker logs (default: a temp folder)."),
) -> None:
    """Run the red-team catalogue through the real gate: one adversarial solution per hack class
    (each must be rejected with its expected reason), honest solutions (must pass), and the
    canaries (zeros, a constant and near misses of the reference: each must fail every definition
    it applies to)."""
    import torch

    from kernelwright.redteam import CASES, run_canaries, run_catalogue
    from kernelwright.redteam.verdicts import SKIPPED

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = require_device(device, hint="run on a GPU machine, or use --device cpu (the catalogue on Triton's interpreter)")
    if jobs is None:
        jobs = 2 if device == "cpu" else 1
    ids = list(case) if case else None
    if ids:
        known = {c.id for c in CASES}
        bad = [i for i in ids if i not in known]
        if bad:
            from kernelwright.cli.common import UsageError

            raise UsageError(f"unknown case(s) {bad}; known: {', '.join(sorted(known))}")
    run_canary_set = canaries if canaries is not None else not ids
    root = out or None
    record = _Record(json_out, device)

    with console.status("red-team cases…"):
        results = run_catalogue(device, ids, jobs=jobs, out_root=root / "cases" if root else None,
                                on_result=record.add_case)
    console.print(_cases_table(results))
    for r in results:
        if r.verdict == SKIPPED:
            console.print(f"[yellow]skipped[/yellow] {r.case.id}: {r.detail}")
    for r in results:
        if not r.ok and r.detail:
            console.print(f"[red]unexpected[/red] {r.case.id}: {r.detail}")
    canary_results = []
    if run_canary_set:
        with console.status("canaries…"):
            canary_results = run_canaries(device, out_root=root / "canaries" if root else None, jobs=jobs,
                                          on_result=record.add_canary)
        console.print(_canary_table(canary_results))
        for c in canary_results:
            if c.detail:
                console.print(f"[{'red' if not c.ok else 'yellow'}]{c.definition} {c.kind}[/]: {c.detail}")
    ok = all(r.ok for r in results) and all(c.ok for c in canary_results)
    ran = [r for r in results if r.verdict != SKIPPED]
    console.print(f"{sum(r.ok for r in ran)}/{len(ran)} cases as expected"
                  + (f", {sum(c.ok for c in canary_results)}/{len(canary_results)} canaries rejected" if canary_results else "")
                  + f", {len(results) - len(ran)} skipped")
    record.write(ok=ok, complete=True)
    if json_out:
        console.print(f"results in [bold]{json_out}[/bold]")
    if not ok:
        raise typer.Exit(1)
