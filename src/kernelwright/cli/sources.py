"""Where a run's definitions and workloads come from.

* a built-in name or alias, or ``package.module:ATTR`` (``definitions.resolve``): the definition's
  own workload sets;
* ``-d PATH.json``: a FlashInfer-Bench definition file (``definitions.adopt``: the built-in of that
  name, else a generic definition), with the workloads of ``--workload-file``;
* ``-d DIR`` or ``--trace-set DIR``: a TraceSet folder's definitions and workloads
  (``--trace-set`` also receives the traces and the solution entries);
* ``--workload-file FILE.jsonl``: FlashInfer-Bench workload lines (workload traces, or bare
  workloads) for the chosen definition; its safetensors paths are relative to the TraceSet the
  file sits in (the folder above its ``workloads/``), else to the file's folder.

Every workload is checked against its definition's axes when it is read (a bad line is a one-line
error naming the file and line, exit 2) and its safetensors files are pinned
(``definitions.fixed.pin_workloads``) before any solution runs.  A missing blob or tensor key is
not bad input: that workload gets a non-PASSED trace and the run goes on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from kernelwright import definitions
from kernelwright.cli.common import UsageError
from kernelwright.definitions import fixed, generic
from kernelwright.definitions.base import BuiltinDefinition
from kernelwright.trace import Definition, Trace, TraceSet, Workload
from kernelwright.trace.jsonio import DataFileError


@dataclass
class Target:
    """One definition to evaluate, with its workloads (None: the definition's own sets; a file's
    or a TraceSet's otherwise, possibly none) and the TraceSet that receives the traces (None:
    the results folder only)."""

    builtin: BuiltinDefinition
    workloads: Optional[List[Workload]] = None
    trace_set: Optional[TraceSet] = None


def is_definition_file(option: str) -> bool:
    return option.endswith(".json") and Path(option).is_file()


def blob_root_of(workload_file: Path) -> Path:
    """The root a workload file's safetensors paths are relative to: the TraceSet that holds the
    file under its ``workloads/`` folder, else the file's own folder."""
    path = Path(workload_file).resolve()
    for parent in path.parents:
        if parent.name == "workloads" and parent.parent != parent:
            return parent.parent
    return path.parent


def read_workload_file(path: Path, definition: Definition) -> List[Workload]:
    """The workloads of ``definition`` in a JSONL file: workload traces (upstream's form) of that
    definition or of its full-size name, or bare Workload objects.  Raises UsageError (file:line)
    for a line that is neither, or whose axes do not fit the definition."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from exc
    base = definitions.base_name(definition.name)
    found: List[Workload] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{number}: malformed JSON ({exc.msg})") from exc
        try:
            if isinstance(data, dict) and "workload" in data:
                trace = Trace.model_validate(data)
                if trace.definition not in (definition.name, base):
                    continue
                workload = trace.workload
            else:
                workload = Workload.model_validate(data)
        except ValueError as exc:
            raise UsageError(f"{path}:{number}: not a workload ({_first_error(exc)})") from exc
        problem = workload_problem(definition, workload)
        if problem:
            raise UsageError(f"{path}:{number}: {problem}")
        found.append(workload)
    return found


def workload_problem(definition: Definition, workload: Workload) -> Optional[str]:
    """One line when a workload cannot belong to ``definition`` (axes, input names), else None."""
    try:
        definition.axis_values(workload.axes)
    except ValueError as exc:
        return f"workload {workload.uuid}: {exc}"
    unknown = sorted(set(workload.inputs) - set(definition.inputs))
    if unknown:
        return f"workload {workload.uuid}: inputs {unknown} are not inputs of {definition.name}"
    return None


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        err = errors()[0]
        return ".".join(str(p) for p in err.get("loc", ())) + ": " + err.get("msg", "invalid")
    return str(exc).splitlines()[0]


def _quick(builtin: BuiltinDefinition, quick: bool) -> BuiltinDefinition:
    return builtin.quick_if(quick)


def from_definition_file(path: Path, quick: bool, workload_file: Optional[Path]) -> Target:
    """``-d PATH.json`` (with ``--workload-file``).  Raises UsageError / DataFileError."""
    definition = generic.load_file(path)
    if workload_file is None:
        if definitions.get_or_none(definition.name) is None:
            raise UsageError(f"{path}: a definition file brings no workloads: add --workload-file FILE.jsonl "
                             "(FlashInfer-Bench workload lines), or use -d on a TraceSet folder")
        return Target(_quick(definitions.adopt(definition, source=Path(path)), quick))
    return _with_workload_file(definition, Path(path), quick, Path(workload_file))


def _with_workload_file(definition: Definition, source: Optional[Path], quick: bool, workload_file: Path) -> Target:
    root = blob_root_of(workload_file)
    builtin = definitions.adopt(definition, source=source, quick=quick)
    workloads = fixed.pin_workloads(read_workload_file(workload_file, builtin.definition), root)
    builtin = definitions.adopt(definition, source=source, workloads=workloads, blob_root=root, quick=quick)
    return Target(builtin, workloads)


def with_workload_file(builtin: BuiltinDefinition, workload_file: Path) -> Target:
    """A built-in or module definition (``-d NAME``) with the workloads of a file instead of its
    own sets."""
    root = blob_root_of(workload_file)
    workloads = read_workload_file(workload_file, builtin.definition)
    return Target(fixed.with_fixed_inputs(builtin, root), fixed.pin_workloads(workloads, root))


def load_trace_set(root: Path) -> TraceSet:
    """A TraceSet folder.  Raises UsageError for a folder without ``definitions/``."""
    root = Path(root)
    if not (root / "definitions").is_dir():
        raise UsageError(f"{root}: not a TraceSet (no definitions/ folder)")
    return TraceSet.load(root)


def from_trace_set(ts: TraceSet, name: str, quick: bool, workload_file: Optional[Path] = None,
                   receive: bool = True) -> Target:
    """Definition ``name`` of a TraceSet with the set's workloads (or those of ``workload_file``).
    ``receive``: the traces go into the set.  Raises UsageError naming the known definitions."""
    base = definitions.base_name(name)
    if base not in ts.definitions and quick and definitions.quick_name(base) in ts.definitions:
        base = definitions.quick_name(base)      # a TraceSet exported from a --quick run
    definition = ts.definitions.get(base)
    if definition is None:
        known = ", ".join(sorted(ts.definitions)[:12]) or "none"
        raise UsageError(f"{ts.root}: no definition {base!r} in this TraceSet (it has: {known})")
    source = ts.definition_files.get(base)
    if workload_file is not None:
        target = _with_workload_file(definition, source, quick, Path(workload_file))
        target.trace_set = ts if receive else None
        return target
    lines = ts.workloads.get(base, [])
    if not lines:
        raise UsageError(f"{ts.root}: definition {base!r} has no workloads in workloads/ (add --workload-file)")
    small = definitions.adopt(definition, source=source, quick=quick).definition
    for line in lines:
        problem = workload_problem(small, line.workload)
        if problem:
            raise UsageError(f"{ts.root}/workloads: {problem}")
    workloads = fixed.pin_workloads([t.workload for t in lines], ts.root)
    builtin = definitions.adopt(definition, source=source, workloads=workloads, blob_root=ts.root, quick=quick)
    return Target(builtin, workloads, ts if receive else None)


def trace_set_names(ts: TraceSet, names: Optional[List[str]]) -> List[str]:
    """The definitions of a TraceSet a bench runs: those named (names or built-in aliases), else
    every definition with workloads."""
    if names:
        out = []
        for n in names:
            found = definitions.get_or_none(n)
            out.append(found.base_name if found is not None and found.base_name in ts.definitions else n)
        return out
    return [n for n in sorted(ts.definitions) if ts.workloads.get(n)]


def definition_option(option: str, quick: bool, workload_file: Optional[Path]) -> Target:
    """What ``-d OPTION`` names when it is not a folder: a definition file, or a name / locator.  Raises UsageError, DataFileError or UnknownDefinition (one line)."""
    if is_definition_file(option):
        return from_definition_file(Path(option), quick, workload_file)
    if option.endswith(".json") and ":" not in option:
        raise DataFileError(f"{option}: no such definition file")
    builtin = _quick(definitions.resolve(option), quick)
    if workload_file is not None:
        return with_workload_file(builtin, Path(workload_file))
    return Target(builtin)


__all__ = ["DataFileError", "Target", "blob_root_of", "definition_option", "from_trace_set", "load_trace_set",
           "read_workload_file", "trace_set_names", "with_workload_file"]
