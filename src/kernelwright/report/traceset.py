"""Results into TraceSets: a run's traces appended to a TraceSet, and a results folder exported as one.

``append_run(ts, plans, traces)`` (``eval``/``bench --trace-set``): every trace goes to
``traces/<op_type>/<definition>.jsonl``, every candidate's solution to
``solutions/<op_type>/<definition>/<name>.json`` (when not there yet), and a definition the set
lacks (a built-in's ``__quick`` variant) to ``definitions/`` with the workloads its traces ran on,
so that flashinfer-bench's ``TraceSet.from_path`` finds everything a trace names.

``export_results(results, dest)`` (``kernelwright export-traceset``): the same for a results folder
of ``bench``/``eval``, from its ``traces/``, the ``definitions/`` and ``solutions/`` the run saved
(older folders: built-ins by name, shipped solutions by name), and the safetensors files the
workloads name, copied to the same relative paths.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from kernelwright.trace import Definition, SafetensorsInput, Solution, Trace, TraceSet
from kernelwright.trace.jsonio import DataFileError, load_model
from kernelwright.trace.trace_set import traces_by_definition


@dataclass
class Appended:
    """What ``append_run`` / ``export_results`` wrote (counts) and what it could not (one line each)."""

    traces: int = 0
    solutions: int = 0
    definitions: int = 0
    workloads: int = 0
    blobs: int = 0
    missing: List[str] = field(default_factory=list)


def _workload_traces(definition_name: str, traces: Iterable[Trace]) -> List[Trace]:
    seen: Dict[str, Trace] = {}
    for t in traces:
        seen.setdefault(t.workload.uuid, Trace(definition=definition_name, workload=t.workload))
    return list(seen.values())


def add_all(ts: TraceSet, definitions: Dict[str, Definition], solutions: Dict[str, Solution],
            traces: Dict[str, List[Trace]]) -> Appended:
    """Write into ``ts`` the definitions it lacks (with the workloads their traces ran on), the
    solutions, then the traces.  Raises DataFileError for a definition or solution of the same
    name and other content (before anything is written for it)."""
    done = Appended()
    for name, items in traces.items():
        if name not in ts.definitions:
            if name not in definitions:
                done.missing.append(f"definition {name}: not found (its traces are written without it)")
            else:
                ts.add_definition(definitions[name])
                done.definitions += 1
                done.workloads += ts.add_workloads(_workload_traces(name, items))
    for sol in solutions.values():
        if sol.name not in ts.solutions:
            ts.add_solution(sol)
            done.solutions += 1
    for name, items in traces.items():
        ts.add_traces(items)
        done.traces += len(items)
    return done


def append_run(ts: TraceSet, plans, traces: Dict[str, List[Trace]]) -> Appended:
    """Append a bench/eval run (``gate.bench.BenchPlan`` list and its traces by definition)."""
    defs = {p.builtin.name: p.builtin.definition for p in plans}
    sols = {c.solution.name: c.solution for p in plans for c in p.candidates
            if any(t.solution == c.solution.name for t in traces.get(p.builtin.name, []))}
    return add_all(ts, defs, sols, traces)


# -- a results folder ------------------------------------------------------------------------
def _results_traces(results: Path) -> Dict[str, List[Trace]]:
    from kernelwright.report.summary import results_trace_files

    files = results_trace_files(results)
    if not files:
        raise FileNotFoundError(f"{results}: no traces/*.jsonl (not a bench or eval results folder)")
    return traces_by_definition(files, keep=lambda t: not t.is_workload_trace())


def _results_definitions(results: Path, names: Iterable[str]) -> Dict[str, Definition]:
    from kernelwright import definitions

    found = {d.name: d for d in (load_model(Definition, p) for p in sorted((results / "definitions").glob("*.json")))}
    for name in names:
        if name not in found:
            try:
                found[name] = definitions.resolve(name).definition
            except definitions.UnknownDefinition:
                pass
    return found


def _results_solutions(results: Path, traces: Dict[str, List[Trace]]) -> Dict[str, Solution]:
    from kernelwright.solutions import shipped_solutions

    wanted = {t.solution for items in traces.values() for t in items if t.solution}
    found = {s.name: s for s in (load_model(Solution, p) for p in sorted((results / "solutions").glob("*.json")))}
    for s in shipped_solutions():
        if s.name in wanted and s.name not in found:
            found[s.name] = s
    return {k: v for k, v in found.items() if k in wanted}


def _blob_root(traces: List[Trace]) -> Optional[Path]:
    """The root the run read safetensors from (the ``|blobs=`` part of the recorded locator)."""
    from kernelwright.trace import record

    for t in traces:
        rec = record.read(t) or {}
        locator = (rec.get("definition") or {}).get("locator") or ""
        if "|blobs=" in locator:
            return Path(locator.rpartition("|blobs=")[2])
    return None


def copy_blobs(traces: Dict[str, List[Trace]], dest: Path) -> tuple:
    """Copy every safetensors file the traces' workloads name from the run's blob root to the same
    relative path under ``dest``; returns (files copied, one line per file not found)."""
    copied, missing = 0, []
    for items in traces.values():
        root = _blob_root(items)
        paths = {spec.path for t in items for spec in t.workload.inputs.values() if isinstance(spec, SafetensorsInput)}
        for rel in sorted(paths):
            if Path(rel).is_absolute():
                continue
            target = dest / rel
            source = (root / rel) if root is not None else None
            if target.exists():
                continue
            if source is None or not source.is_file():
                missing.append(f"blob {rel}: not found{'' if root is None else ' under ' + str(root)}")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            copied += 1
    return copied, missing


def export_results(results: Path, dest: Path) -> Appended:
    """Turn a results folder into a TraceSet at ``dest`` (created, or appended to when it is one).
    Raises FileNotFoundError without traces, DataFileError for conflicting names."""
    results, dest = Path(results), Path(dest)
    traces = _results_traces(results)
    ts = TraceSet.load(dest) if (dest / "definitions").is_dir() else TraceSet(root=dest)
    defs = _results_definitions(results, traces)
    sols = _results_solutions(results, traces)
    for name in traces:
        if name not in ts.definitions and name not in defs:
            raise DataFileError(f"{results}: definition {name!r} of its traces is neither saved with the run nor "
                                "built in: export it from a run that saved it")
    done = add_all(ts, defs, sols, traces)
    for name, items in traces.items():
        done.workloads += ts.add_workloads(_workload_traces(name, items))
    missing_sols = sorted({t.solution for items in traces.values() for t in items} - set(ts.solutions))
    done.missing += [f"solution {s}: not saved with the run (its traces are written without it)" for s in missing_sols]
    copied, missing = copy_blobs(traces, dest)
    done.blobs += copied
    done.missing += missing
    return done
