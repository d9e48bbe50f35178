"""Shared CLI plumbing: one-line errors, loading solutions, choosing workloads and devices."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Callable, List, Optional

import typer

from kernelwright.cluster.errors import ClusterUnavailable
from kernelwright.definitions import UnknownDefinition
from kernelwright.definitions.base import BuiltinDefinition
from kernelwright.trace import Solution, Workload
from kernelwright.trace.jsonio import DataFileError, load_model


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


def fail(message: str, code: int = 2) -> None:
    typer.secho(f"error: {message}", err=True, fg="red")
    raise typer.Exit(code)


def one_line_errors(fn: Callable) -> Callable:
    """Turn expected failures into a one-line message and a non-zero exit (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except (UsageError, DataFileError, UnknownDefinition, FileNotFoundError, ValueError, KeyError,
                ClusterUnavailable) as exc:
            fail(_one_line(exc))
        except KeyboardInterrupt:
            fail("interrupted (results written so far are kept)", 130)

    return wrapper


def _one_line(exc: BaseException) -> str:
    """One line naming the problem; pydantic errors name the field and what it expected."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ())) or exc.title
        return f"invalid {exc.title}: {loc}: {err.get('msg', 'invalid value')}"
    if isinstance(exc, KeyError) and not isinstance(exc, UnknownDefinition):
        return f"missing field {exc.args[0]!r}" if exc.args else "missing field"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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


def require_device(device: str, hint: str = "run on a GPU machine, or use --device cpu --quick to see the pipeline on CPU") -> str:
    """Check a --device value ("cpu", "cuda" or "cuda:N").  Exits with a one-line error when it is
    malformed (2) or names a CUDA device this machine lacks (1)."""
    import re

    import torch

    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise UsageError(f"--device {device!r}: expected cpu, cuda or cuda:N")
    if device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"no CUDA device here: {hint}", 1)
    if device.startswith("cuda:") and int(device.split(":")[1]) >= torch.cuda.device_count():
        raise UsageError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if device == "cpu":
        import os

        os.environ.setdefault("TRITON_INTERPRET", "1")
    return device


def command_line() -> str:
    return " ".join(["kernelwright"] + sys.argv[1:])


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")


def check_selectors(selectors: Optional[List[str]], picked: List[List[Workload]]) -> None:
    """Raises UsageError naming a uuid prefix that matched no workload of any definition."""
    uuids = [w.uuid for ws in picked for w in ws]
    for sel in selectors or []:
        for part in (p.strip() for p in sel.split(",")):
            if part and not part.isdigit() and not any(u.startswith(part) for u in uuids):
                raise UsageError(f"no workload of the selected definitions matches {part!r}")
