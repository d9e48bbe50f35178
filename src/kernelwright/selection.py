"""What a run evaluates, as the user names it: a solution by path, workloads by selector.

Shared by the command line (``kernelwright.cli``) and the cluster's measurement script
(``kernelwright.cluster.measure``); what the user got wrong raises ``UsageError``, which the CLI
prints as one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from kernelwright.definitions.base import BuiltinDefinition
from kernelwright.trace import Solution, Workload
from kernelwright.trace.jsonio import load_model


class UsageError(Exception):
    """Bad input from the user: the CLI prints it as one line, exit code 2."""


def load_solution(path: Path) -> Solution:
    """A solution folder (manifest.json + sources) or a FlashInfer-Bench Solution JSON file."""
    from kernelwright.solutions import load_solution_folder

    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    if path.is_dir():
        if (path / "manifest.json").is_file():
            return load_solution_folder(path)
        found = sorted(path.glob("*.json"))
        if len(found) == 1:
            return load_model(Solution, found[0])
        raise UsageError(f"{path}: not a solution folder (no manifest.json) and not a single Solution JSON")
    if path.suffix == ".json":
        return load_model(Solution, path)
    raise UsageError(f"{path}: expected a solution folder or a Solution .json")


def pick_workloads(builtin: BuiltinDefinition, selectors: Optional[List[str]], limit: Optional[int],
                   sweep: bool = False, strict: bool = True,
                   available: Optional[List[Workload]] = None) -> List[Workload]:
    """Public workloads (with ``sweep``: the definition's sweep set; with ``available``: those, e.g.
    a workload file's or a TraceSet's) filtered by uuid prefixes or 0-based indices, optionally
    the first N.  With ``strict`` False (several definitions in one run) a uuid prefix that names
    no workload of this definition is left to the others (``check_selectors`` reports one that
    matches none).

    Raises:
        UsageError: (strict) no workload matches a selector, or ``sweep`` for a definition without a sweep set.
    """
    if available is not None:
        if sweep:
            raise UsageError("--sweep picks the built-in serving-envelope workloads: leave out --workload-file "
                             "and --trace-set")
        workloads = list(available)
    elif sweep:
        if builtin.sweep_workloads is None:
            raise UsageError(f"{builtin.name} has no sweep workload set (the serving-envelope sets of moe, indexer "
                             "and attention exist at full size only: leave out --quick)")
        workloads = builtin.sweep_workloads()
    else:
        workloads = builtin.public_workloads()
    if selectors:
        chosen = []
        for sel in selectors:
            for part in sel.split(","):
                part = part.strip()
                if part.isdigit() and int(part) < len(workloads):
                    chosen.append(workloads[int(part)])
                else:
                    match = [w for w in workloads if w.uuid.startswith(part)]
                    if not match and strict:
                        raise UsageError(f"no workload of {builtin.name} matches {part!r}")
                    chosen.extend(match)
        workloads = list({w.uuid: w for w in chosen}.values())
    if limit is not None:
        workloads = workloads[:limit]
    return workloads


def check_selectors(selectors: Optional[List[str]], picked: List[List[Workload]]) -> None:
    """Raises UsageError naming a uuid prefix that matched no workload of any definition."""
    uuids = [w.uuid for ws in picked for w in ws]
    for sel in selectors or []:
        for part in (p.strip() for p in sel.split(",")):
            if part and not part.isdigit() and not any(u.startswith(part) for u in uuids):
                raise UsageError(f"no workload of the selected definitions matches {part!r}")
