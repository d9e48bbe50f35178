"""TraceSet: a dataset folder in the FlashInfer-Trace layout.

Layout (flashinfer-bench ``TraceSet``; ``add_traces`` and ``add_workload_traces`` write the
``<op_type>`` level, ``from_path`` reads any depth)::

    root/definitions/<op_type>/<definition>.json             one Definition per file
    root/solutions/<op_type>/<definition>/<solution>.json    one Solution per file
    root/workloads/<op_type>/<definition>.jsonl              workload traces, one per line
    root/traces/<op_type>/<definition>.jsonl                 evaluation traces, one per line
    root/blob/                                               safetensors the workloads name
                                                             (paths relative to root)

Files are found recursively, so any other sub-folders load too; where a definition was found is
kept (``definition_files``: the gate locates a definition that is not built in by its file).
Writing appends (``add_traces``, ``add_workloads``) or adds files that are not there yet
(``add_definition``, ``add_solution``); nothing already in the set is rewritten, except by
``save``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional

from kernelwright.trace.definition import Definition
from kernelwright.trace.jsonio import DataFileError, append_jsonl, dump_json, iter_jsonl, load_model
from kernelwright.trace.solution import Solution
from kernelwright.trace.trace import Trace


@dataclass
class TraceSet:
    root: Path
    definitions: Dict[str, Definition] = field(default_factory=dict)
    solutions: Dict[str, Solution] = field(default_factory=dict)
    workloads: Dict[str, List[Trace]] = field(default_factory=dict)
    traces: Dict[str, List[Trace]] = field(default_factory=dict)
    definition_files: Dict[str, Path] = field(default_factory=dict)
    solution_files: Dict[str, Path] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> "TraceSet":
        """Load every file under ``root``.  Raises DataFileError on the first bad file, a duplicate
        definition or solution name (flashinfer-bench refuses those too), or a ``root`` that is
        not a folder."""
        root = Path(root)
        if not root.is_dir():
            raise DataFileError(f"{root}: not a folder")
        ts = cls(root=root)
        _load_named(root / "definitions", Definition, "definition", ts.definitions, ts.definition_files)
        _load_named(root / "solutions", Solution, "solution", ts.solutions, ts.solution_files)
        ts.workloads = traces_by_definition(sorted((root / "workloads").rglob("*.jsonl")))
        ts.traces = traces_by_definition(sorted((root / "traces").rglob("*.jsonl")))
        return ts

    # -- where things go ---------------------------------------------------------------------
    def _op_dir(self, definition_name: str) -> Path:
        """``<op_type>`` for a known definition; the bare name's folder otherwise."""
        d = self.definitions.get(definition_name)
        return Path(d.op_type) if d is not None else Path()

    def definition_path(self, definition: Definition) -> Path:
        return self.root / "definitions" / definition.op_type / f"{definition.name}.json"

    def solution_path(self, solution: Solution) -> Path:
        return self.root / "solutions" / self._op_dir(solution.definition) / solution.definition / f"{solution.name}.json"

    def workloads_path(self, definition_name: str) -> Path:
        return self.root / "workloads" / self._op_dir(definition_name) / f"{definition_name}.jsonl"

    def traces_path(self, definition_name: str) -> Path:
        return self.root / "traces" / self._op_dir(definition_name) / f"{definition_name}.jsonl"

    # -- adding --------------------------------------------------------------------------------
    def add_definition(self, definition: Definition) -> Path:
        """Write a definition that is not in the set yet; one of the same name must be equal.
        Returns its file.  Raises DataFileError for a different definition of the same name."""
        known = self.definitions.get(definition.name)
        if known is not None:
            if known != definition:
                raise DataFileError(f"{self.definition_files.get(definition.name, self.root)}: holds another "
                                    f"definition named {definition.name!r}")
            return self.definition_files.get(definition.name, self.definition_path(definition))
        return _write_new(definition, self.definition_path(definition), self.definitions, self.definition_files)

    def solution_conflict(self, solution: Solution) -> str:
        """'' when ``solution`` may be added (absent, or the same content), else one line."""
        known = self.solutions.get(solution.name)
        if known is None or known.content_hash() == solution.content_hash():
            return ""
        return (f"{self.solution_files.get(solution.name, self.root)}: the TraceSet holds another solution named "
                f"{solution.name!r} (different sources): give yours its own name")

    def add_solution(self, solution: Solution) -> Path:
        """Write a solution that is not in the set yet (the same content is left as it is).
        Raises DataFileError for different sources under the same name."""
        problem = self.solution_conflict(solution)
        if problem:
            raise DataFileError(problem)
        if solution.name in self.solutions:
            return self.solution_files.get(solution.name, self.solution_path(solution))
        return _write_new(solution, self.solution_path(solution), self.solutions, self.solution_files)

    def add_workloads(self, workloads: Iterable[Trace]) -> int:
        """Append the workload traces whose uuid the definition does not have yet; returns how many."""
        added = 0
        for t in workloads:
            known = {w.workload.uuid for w in self.workloads.get(t.definition, [])}
            if t.workload.uuid in known:
                continue
            self.workloads.setdefault(t.definition, []).append(t)
            append_jsonl([t], self.workloads_path(t.definition))
            added += 1
        return added

    def add_traces(self, traces: List[Trace]) -> None:
        """Append traces in memory and on disk (``traces/<op_type>/<definition>.jsonl``)."""
        for t in traces:
            self.traces.setdefault(t.definition, []).append(t)
            append_jsonl([t], self.traces_path(t.definition))

    def save(self) -> None:
        """Write everything held in memory (overwrites definitions/solutions, rewrites JSONLs)."""
        for d in self.definitions.values():
            dump_json(d, self.definition_path(d))
        for s in self.solutions.values():
            dump_json(s, self.solution_path(s))
        for name, items in self.workloads.items():
            path = self.workloads_path(name)
            path.unlink(missing_ok=True)
            append_jsonl(items, path)
        for name, items in self.traces.items():
            path = self.traces_path(name)
            path.unlink(missing_ok=True)
            append_jsonl(items, path)


def _load_named(folder: Path, model, kind: str, found: Dict, files: Dict[str, Path]) -> None:
    """Load every ``*.json`` below ``folder`` as ``model`` into ``found`` and where it was into
    ``files`` (both by name).  Raises DataFileError on a bad file or a name already found."""
    for p in sorted(folder.rglob("*.json")):
        item = load_model(model, p)
        if item.name in found:
            raise DataFileError(f"{p}: {kind} {item.name!r} is also in {files[item.name]}")
        found[item.name] = item
        files[item.name] = p


def _write_new(item, path: Path, found: Dict, files: Dict[str, Path]) -> Path:
    """Write ``item`` (a Definition or Solution) to ``path`` and enter both into ``found`` and
    ``files`` (by name); returns ``path``."""
    dump_json(item, path)
    found[item.name] = item
    files[item.name] = path
    return path


def traces_by_definition(files: Iterable[Path],
                         keep: Optional[Callable[[Trace], bool]] = None) -> Dict[str, List[Trace]]:
    """The traces of the JSONL ``files``, by definition name, in file order; only those ``keep``
    accepts where it is given."""
    traces: Dict[str, List[Trace]] = {}
    for f in files:
        for t in iter_jsonl(Trace, f):
            if keep is None or keep(t):
                traces.setdefault(t.definition, []).append(t)
    return traces
