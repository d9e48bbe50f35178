"""The hidden split's secret: a salt that decides the held-out workloads' shapes and seeds.

It is read from ``$KERNELWRIGHT_HIDDEN_SALT`` or from ``<cache>/hidden_salt`` (created with 32
random bytes on first use, mode 0600), never from the project or an agent's worktree.  The
held-out workloads are generated from it in memory and never written where a workspace can
read them.
"""

from __future__ import annotations

import os
import secrets

from kernelwright.gate.device_info import cache_dir


def hidden_salt() -> str:
    env = os.environ.get("KERNELWRIGHT_HIDDEN_SALT")
    if env:
        return env
    path = cache_dir() / "hidden_salt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
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
