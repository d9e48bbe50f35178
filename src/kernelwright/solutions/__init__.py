"""The kernels kernelwright ships, one folder per solution, each a FlashInfer-Bench Solution.

A solution folder holds ``manifest.json`` (name, definition, author, language, entry point,
destination-passing style, description) and its source files.  Sources are self-contained:
they import torch, triton and the standard library only, never kernelwright, and reach their
sibling files through relative imports (the gate imports them as one package, as
flashinfer-bench's builders do).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

from kernelwright.trace import Solution

SHIPPED_ROOT = Path(__file__).parent
# candidates: written and CPU-tested, waiting for the H200 measurement that would make them the
# shipped solution of their definition (never run by default; ``bench -s <folder>`` runs one)
CANDIDATES_ROOT = SHIPPED_ROOT / "candidates"


def load_solution_folder(folder: Path, manifest: str = "manifest.json") -> Solution:
    """Pack a solution folder (``manifest.json`` + sources) into a Solution.  ``manifest`` names
    another manifest file in the folder (two baselines of one folder share its sources).

    Raises:
        FileNotFoundError: the folder has no such manifest.
        ValueError: the manifest is malformed or the entry file is missing.
    """
    folder = Path(folder)
    manifest_path = folder / manifest
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{folder}: no {manifest} (not a solution folder)")
    try:
        meta = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{manifest_path}: malformed JSON ({exc.msg})") from exc
    missing = [k for k in ("name", "definition") if k not in meta]
    if missing:
        raise ValueError(f"{manifest_path}: missing {', '.join(missing)} (a manifest needs at least name and definition)")
    return Solution.from_folder(
        folder,
        name=meta["name"],
        definition=meta["definition"],
        author=meta.get("author", "kernelwright"),
        language=meta.get("language", "triton"),
        entry_point=meta.get("entry_point", "kernel.py::run"),
        destination_passing_style=meta.get("destination_passing_style", True),
        target_hardware=meta.get("target_hardware"),
        dependencies=meta.get("dependencies"),
        description=meta.get("description"),
    )


def _solutions_in(root: Path, definition: Optional[str]) -> List[Solution]:
    found = []
    for manifest in sorted(root.glob("*/manifest.json")):
        sol = load_solution_folder(manifest.parent)
        if definition is None or sol.definition == definition:
            found.append(sol)
    return found


def shipped_solutions(definition: Optional[str] = None) -> List[Solution]:
    """Every shipped solution (optionally only those for one definition name)."""
    return _solutions_in(SHIPPED_ROOT, definition)


def candidate_solutions(definition: Optional[str] = None) -> List[Solution]:
    """The candidate solutions (``CANDIDATES_ROOT``), optionally only those for one definition name."""
    return _solutions_in(CANDIDATES_ROOT, definition)
