"""Shared CLI plumbing: one-line errors, checking devices, writing JSON.  Loading solutions and
choosing workloads: ``kernelwright.selection`` (shared with ``cluster``)."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Callable

import typer

from kernelwright.cluster.errors import ClusterUnavailable
from kernelwright.definitions import UnknownDefinition
from kernelwright.selection import UsageError
from kernelwright.trace.jsonio import DataFileError


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
        except (UsageError, DataFileError, UnknownDefinition, FileNotFoundError, NotADirectoryError,
                IsADirectoryError, PermissionError, ValueError, KeyError, ClusterUnavailable) as exc:
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
