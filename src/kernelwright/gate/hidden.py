"""The hidden split's secret: a salt that decides the held-out workloads' shapes and seeds.

It is read from ``<cache>/hidden_salt`` (created with 32 random bytes on first use, mode 0600;
a bounded worker can neither read it nor see the cache, gate/sandbox.py), or from
``$KERNELWRIGHT_HIDDEN_SALT``, never from the project or an agent's worktree.  The environment
variable is taken out of the environment as soon as kernelwright is imported
(``take_salt_from_environment``): removed from ``os.environ`` and overwritten in the process's
initial environment block, which ``/proc/<pid>/environ`` shows for the process's whole life.
The held-out workloads are generated from the salt in memory and never written where a
workspace can read them.
"""

from __future__ import annotations

import ctypes
import os
import secrets
from typing import Optional

ENV = "KERNELWRIGHT_HIDDEN_SALT"
_from_environment: Optional[str] = None


def _scrub_initial_environment(name: str) -> None:
    """Overwrite the value of ``name`` in the C environment (``environ``) in place before it is
    unset: ``unsetenv`` only drops the pointer, and the string of the exec environment stays
    readable through ``/proc/<pid>/environ``."""
    try:
        libc = ctypes.CDLL(None)
        environ = ctypes.POINTER(ctypes.c_char_p).in_dll(libc, "environ")
    except (OSError, ValueError, AttributeError):
        return
    prefix = name.encode() + b"="
    i = 0
    while True:
        entry = environ[i]
        if entry is None:
            return
        if entry.startswith(prefix):
            address = ctypes.cast(environ, ctypes.POINTER(ctypes.c_void_p))[i]
            ctypes.memset(address + len(prefix), ord("x"), len(entry) - len(prefix))
        i += 1


def take_salt_from_environment() -> None:
    """Move ``$KERNELWRIGHT_HIDDEN_SALT`` into this module's memory: out of ``os.environ`` (so
    no child process inherits it) and out of the exec environment block (so no process that may
    read this one's ``/proc/<pid>/environ`` finds it).  Called when kernelwright is imported."""
    global _from_environment
    value = os.environ.get(ENV)
    if not value:
        return
    _from_environment = value
    _scrub_initial_environment(ENV)
    os.environ.pop(ENV, None)


def hidden_salt() -> str:
    """The salt: the environment's (taken at import, or set since), else the cache file's.
    The cache file is created on first use (mode 0600) and kept at 0600."""
    take_salt_from_environment()
    if _from_environment:
        return _from_environment
    from kernelwright.gate.device_info import cache_dir

    path = cache_dir() / "hidden_salt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)
    return path.read_text().strip()


def held_out_workloads(builtin, salt: str, keep=None):
    """The definition's hidden workloads for ``salt`` without any whose axis values equal a public
    (or quick) workload's: a held-out shape that happens to be public proves nothing.
    ``keep``: an optional predicate on the workload's axis values (e.g. a size cap for CPU)."""
    seen = set()
    for w in list(builtin.public_workloads()) + list(builtin.quick_workloads()):
        seen.add(tuple(sorted(builtin.definition.axis_values(w.axes).items())))
    out = []
    for w in builtin.hidden_workloads(salt):
        axes = builtin.definition.axis_values(w.axes)
        key = tuple(sorted(axes.items()))
        if key in seen or (keep is not None and not keep(axes)):
            continue
        seen.add(key)
        out.append(w)
    return out
