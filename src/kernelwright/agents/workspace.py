"""Workspace confinement and small file/shell helpers used by the OpenAI
tools and the scripted backend.

Every path an agent names is relative to the workspace; absolute paths,
``..`` components and symlinks that resolve outside the workspace are
rejected with :class:`WorkspaceEscape`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path, PurePosixPath
from typing import Optional

from .base import AgentError


class WorkspaceEscape(AgentError, ValueError):
    """A path points outside the workspace (or is otherwise not allowed)."""


def resolve_in_workspace(workspace: Path, rel: str) -> Path:
    """Map the relative path ``rel`` into ``workspace``.

    Raises :class:`WorkspaceEscape` for an empty or absolute path, a ``..``
    component, a NUL byte, or a path whose resolved location (following
    symlinks) is outside the workspace.
    """
    if not isinstance(rel, str) or not rel.strip():
        raise WorkspaceEscape("path is empty")
    if "\x00" in rel:
        raise WorkspaceEscape("path contains a NUL byte")
    if rel.startswith(("/", "\\", "~")) or os.path.isabs(rel) or (len(rel) > 1 and rel[1] == ":"):
        raise WorkspaceEscape(f"absolute paths are not allowed: {rel!r}")
    parts = PurePosixPath(rel.replace("\\", "/")).parts
    if any(p == ".." for p in parts):
        raise WorkspaceEscape(f"'..' is not allowed in paths: {rel!r}")
    root = Path(workspace).resolve()
    target = (root / Path(*parts)) if parts else root
    resolved = target.resolve()
    if resolved != root and root not in resolved.parents:
        raise WorkspaceEscape(f"path leaves the workspace (symlink?): {rel!r}")
    return resolved


def write_text_file(workspace: Path, rel: str, content: str) -> Path:
    """Write ``content`` (UTF-8) to ``rel`` inside ``workspace``, creating parent dirs.

    Raises :class:`WorkspaceEscape` if the path is not confined.
    """
    path = resolve_in_workspace(workspace, rel)
    if path == Path(workspace).resolve():
        raise WorkspaceEscape("cannot write to the workspace root")
    path.parent.mkdir(parents=True, exist_ok=True)
    # re-check after mkdir: a parent could have been a symlink created meanwhile
    resolve_in_workspace(workspace, rel)
    path.write_text(content, encoding="utf-8")
    return path


def delete_file(workspace: Path, rel: str) -> bool:
    """Delete file ``rel`` in ``workspace``; returns False if it did not exist."""
    path = resolve_in_workspace(workspace, rel)
    if path.is_file():
        path.unlink()
        return True
    return False


def tail(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text``, marked when cut."""
    if len(text) <= limit:
        return text
    return f"...[{len(text) - limit} chars cut]...\n" + text[-limit:]


def run_command(
    argv: list[str] | str,
    *,
    cwd: Path,
    timeout_s: float,
    env: Optional[dict[str, str]] = None,
    output_limit: int = 16_000,
) -> dict[str, object]:
    """Run a command in ``cwd`` with a time limit (seconds).

    ``argv`` as a string runs through ``bash -c``.  Returns a dict with
    ``exit_code`` (None on timeout), ``timed_out``, ``stdout`` and ``stderr``
    (tails of at most ``output_limit`` characters) and ``duration_s``.
    Never raises for a failing command; a missing executable is reported
    with exit code 127.
    """
    cmd = ["bash", "-c", argv] if isinstance(argv, str) else list(argv)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
    except OSError as exc:
        return {"exit_code": 127, "timed_out": False, "stdout": "", "stderr": str(exc), "duration_s": 0.0}
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
    return {
        "exit_code": None if timed_out else proc.returncode,
        "timed_out": timed_out,
        "stdout": tail(out.decode("utf-8", errors="replace"), output_limit),
        "stderr": tail(err.decode("utf-8", errors="replace"), output_limit),
        "duration_s": round(time.monotonic() - start, 3),
    }
