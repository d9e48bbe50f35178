"""TraceSet: a dataset folder in the FlashInfer-Trace layout.

Layout (flashinfer-bench ``TraceSet``)::

    root/definitions/**.json   one Definition per file
    root/solutions/**.json     one Solution per file
    root/workloads/**.jsonl    workload traces, one per line
    root/traces/**.jsonl       evaluation traces, one per line
    root/blob/                 safetensors referenced by workloads (paths relative to root)

Sub-folders are free (files are found recursively).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

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

    @classmethod
    def load(cls, root: Path) -> "TraceSet":
        """Load every file under ``root``.  Raises DataFileError on the first bad file."""
        root = Path(root)
        if not root.is_dir():
            raise DataFileError(f"{root}: not a folder")
        ts = cls(root=root)
        for p in sorted((root / "definitions").rglob("*.json")):
            d = load_model(Definition, p)
            ts.definitions[d.name] = d
        for p in sorted((root / "solutions").rglob("*.json")):
            s = load_model(Solution, p)
            ts.solutions[s.name] = s
        for p in sorted((root / "workloads").rglob("*.jsonl")):
            for t in iter_jsonl(Trace, p):
                ts.workloads.setdefault(t.definition, []).append(t)
        for p in sorted((root / "traces").rglob("*.jsonl")):
            for t in iter_jsonl(Trace, p):
                ts.traces.setdefault(t.definition, []).append(t)
        return ts

    def save(self) -> None:
        """Write everything held in memory (overwrites definitions/solutions, rewrites JSONLs)."""
        for d in self.definitions.values():
            dump_json(d, self.root / "definitions" / d.op_type / f"{d.name}.json")
        for s in self.solutions.values():
            dump_json(s, self.root / "solutions" / s.author / s.definition / f"{s.name}.json")
        for name, items in self.workloads.items():
            path = self.root / "workloads" / f"{name}.jsonl"
            path.unlink(missing_ok=True)
            append_jsonl(items, path)
        for name, items in self.traces.items():
            path = self.root / "traces" / f"{name}.jsonl"
            path.unlink(missing_ok=True)
            append_jsonl(items, path)

    def add_traces(self, traces: List[Trace]) -> None:
        """Append traces in memory and on disk (``traces/<definition>.jsonl``)."""
        for t in traces:
            self.traces.setdefault(t.definition, []).append(t)
            append_jsonl([t], self.root / "traces" / f"{t.definition}.jsonl")
