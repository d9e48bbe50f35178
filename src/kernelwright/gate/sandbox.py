"""The OS boundary around a worker: another uid without capabilities, its own mount (and PID)
namespace, a private scratch directory (docs/gate.md, section 1 "The boundary").

Levels, strongest first (``KERNELWRIGHT_ISOLATION``; ``auto``, the default, is ``full`` on CPU and
``mount`` on CUDA):

``full``
    ``unshare --mount --pid --fork --kill-child --mount-proc``: the worker sees only its own
    processes (its own ``/proc``), and everything it starts dies with its PID namespace; plus
    everything of ``mount``.  Not the CUDA default: legacy CUDA IPC handles (torch's
    ``share_memory`` of CUDA tensors) cannot be opened across PID namespaces (NCCL issue #360,
    UCX PR #11514); the descriptor sharing of ``gate/cuda_share.py`` can, and a CUDA worker at
    ``full`` passes the boundary's GPU test with it, but has not yet run a bench.
``mount``
    ``unshare --mount``: every mount read-only (``mount_setattr(2)``, recursive), fresh tmpfs
    on ``/tmp`` and ``/var/tmp`` with only the worker's scratch directory in them, the
    kernelwright cache, the run's results folder and its worker logs covered by an empty tmpfs
    (``guards.boundary_hidden_dirs``), and directories the
    worker's uid cannot enter (``/root`` holding the interpreter) replaced by a tmpfs that holds
    only what the worker must read (the interpreter, ``sys.path``, the working directory), bound
    back read-only.  ``/dev`` stays (device files ignore read-only mounts); ``/dev/shm`` is a
    private tmpfs on CPU and the host's on CUDA (torch opens the CUDA-IPC reference counters
    there by name); plus everything of ``uid``.
``uid``
    ``setpriv --reuid=U --regid=U --clear-groups --inh-caps=-all --bounding-set=-all
    --no-new-privs``: a uid of its own per worker (no two workers can signal, trace or read each
    other), no capabilities, and the parent non-dumpable (``PR_SET_DUMPABLE`` 0, set by
    ``protect_parent``): ``/proc/<parent>/mem`` and ``/environ`` cannot be opened, the parent
    cannot be traced.  Files stay readable as the file modes say.
``none``
    the worker runs as the parent's user (no boundary).

On CUDA the parent cannot open a worker's legacy CUDA IPC handles across the uid change
("mapping of buffer object failed"), so a CUDA worker comes up behind ``uid`` or ``mount`` only
with descriptor sharing (``gate/cuda_share.py``, the default where ``cuda.bindings`` imports);
with legacy IPC it falls back to ``none`` (docs/gate.md, section 1).

Every level but ``none`` needs root.  Where a level cannot be set up (not root, a tool missing,
a mount refused, the worker failing to start under it) the session falls back to the next one
and records why (``Boundary.fallbacks``); the worker always runs.  The worker is always started
with ``python -I``; the set-up step before it runs as root under ``python -I -S`` (no site
packages, so a planted ``.pth`` file never runs as root).

What the parent knows about a worker (``Boundary.as_note``, the trace's ``gate.notes.isolation``)
comes from three places: the level it set up, ``observe(pid)`` (the worker's uid, capabilities,
no_new_privs and namespaces read from ``/proc/<pid>`` by the parent: a solution cannot change
those back) and ``self_test`` (run in the worker before any solution code: it tries to open the
parent's memory and environment, to write the package and site-packages, to read the salt, to
list the hidden directories).

This file runs as a script in the set-up step (``python -I -S sandbox.py PLAN``), so its
module level imports the standard library only.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

LEVELS = ("full", "mount", "uid", "none")
ENV = "KERNELWRIGHT_ISOLATION"
# uids of workers: one per worker, drawn at random from this range (no passwd entry is needed)
UID_BASE, UID_SPAN = 1_500_000_000, 1 << 28
# extra directories the worker must read, colon-separated (e.g. a CUDA toolkit under /root)
READABLE_ENV = "KERNELWRIGHT_BOUNDARY_READABLE"


# -- what the parent asks for ------------------------------------------------------------------
def requested_level(device: str, value: Optional[str] = None) -> str:
    """The level asked for: ``value``, else ``$KERNELWRIGHT_ISOLATION``, else ``auto``; ``auto``
    is ``full`` on CPU and ``mount`` on CUDA (see the module docstring).

    Raises:
        ValueError: an unknown level name.
    """
    value = (value or os.environ.get(ENV) or "auto").strip().lower()
    if value == "auto":
        return "mount" if str(device).startswith("cuda") else "full"
    if value not in LEVELS:
        raise ValueError(f"{ENV}={value!r}: expected one of auto, {', '.join(LEVELS)}")
    return value


def levels_from(level: str) -> List[str]:
    """``level`` and every weaker one, in the order a session tries them."""
    return list(LEVELS[LEVELS.index(level):])


def why_unavailable(level: str) -> Optional[str]:
    """Why ``level`` cannot be set up in this process (None: it can be tried)."""
    if level == "none":
        return None
    if os.geteuid() != 0:
        return "the gate does not run as root"
    if not shutil.which("setpriv"):
        return "setpriv (util-linux) not found"
    if level in ("full", "mount") and not shutil.which("unshare"):
        return "unshare (util-linux) not found"
    return None


_PR_SET_DUMPABLE = 4


def protect_parent() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` on this process: a process without CAP_SYS_PTRACE can then
    neither trace it nor open its ``/proc/<pid>/mem`` or ``/environ`` (ptrace(2), "Ptrace access
    mode checking"), whatever its uid.  Returns whether the flag is now off."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        return libc.prctl(3, 0, 0, 0, 0) == 0      # PR_GET_DUMPABLE
    except Exception:
        return False


@dataclass
class Boundary:
    """One worker's boundary: what was asked, what was set up, what was seen."""

    requested: str
    level: str = "none"
    uid: Optional[int] = None
    scratch: Optional[str] = None
    fallbacks: List[str] = field(default_factory=list)     # "<level>: why it was not used"
    observed: Dict[str, Any] = field(default_factory=dict)  # observe(pid) after the ready message
    self_test: Dict[str, Any] = field(default_factory=dict)  # the worker's report before any solution code

    def as_note(self) -> Dict[str, Any]:
        """The trace's ``gate.notes.isolation``."""
        note: Dict[str, Any] = {"level": self.effective_level(), "requested": self.requested, "set_up": self.level}
        if self.uid is not None:
            note["uid"] = self.uid
        if self.fallbacks:
            note["fallbacks"] = list(self.fallbacks)
        if self.observed:
            note["observed"] = dict(self.observed)
        failed = list(self.self_test.get("failed") or [])
        if failed:
            note["self_test_failed"] = failed
        elif self.self_test:
            note["self_test"] = "passed"
        return note

    def effective_level(self) -> str:
        """The level the parent's own observation of the worker confirms (``observe``), no
        stronger than the one set up; ``none`` when any check of the worker's self-test failed
        (the boundary did not hold where it was tried)."""
        seen = self.observed
        level = "none"
        if seen and seen.get("uid", 0) != 0 and seen.get("capabilities") == 0 and seen.get("no_new_privs"):
            level = "uid"
            if seen.get("mount_namespace"):
                level = "full" if seen.get("pid_namespace") else "mount"
        if self.self_test.get("failed"):
            level = "none"
        return LEVELS[max(LEVELS.index(level), LEVELS.index(self.level))]


# -- the plan: built by the parent, carried out by the set-up step -------------------------------
def new_uid(taken=()) -> int:
    """A uid for one worker, not in ``taken``."""
    while True:
        uid = UID_BASE + secrets.randbelow(UID_SPAN)
        if uid not in taken:
            return uid


def readable_paths() -> List[str]:
    """What a worker must be able to read: the interpreter (its prefixes and the executable's
    directory, through symlinks), every ``sys.path`` entry, the working directory (spawn
    changes into it), the parent's ``__main__`` script (spawn imports it) and
    ``$KERNELWRIGHT_BOUNDARY_READABLE``.  Real paths, innermost dropped."""
    found = set()

    def add(p: Optional[str]) -> None:
        if not p:
            return
        real = os.path.realpath(p)
        if os.path.isfile(real):
            real = os.path.dirname(real)
        if os.path.isdir(real):
            found.add(real)

    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", None)):
        add(p)
    add(os.path.dirname(sys.executable))
    add(os.path.dirname(os.path.realpath(sys.executable)))
    for p in sys.path:
        add(p or os.getcwd())
    add(os.getcwd())
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    add(main)
    for p in (os.environ.get(READABLE_ENV) or "").split(":"):
        add(p)
    ordered = sorted(found, key=len)
    out: List[str] = []
    for p in ordered:
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def make_scratch(uid: int, base: Optional[str] = None) -> str:
    """A private directory for one worker, owned by ``uid``, mode 0700, with ``home``, ``tmp``
    and ``cache`` inside: Triton's and CUDA's caches, temp files and the solution's sources go
    there.  The same path inside and outside the worker's mount namespace: multiprocessing's
    resource sharer listens on a socket in the worker's temp directory, and the parent
    connects to it by path."""
    base = base or ("/tmp" if os.path.isdir("/tmp") else None)
    import tempfile

    root = tempfile.mkdtemp(prefix="kw-worker-", dir=base)
    for sub in ("home", "tmp", "cache"):
        os.makedirs(os.path.join(root, sub), mode=0o700)
    for dirpath, dirnames, _ in os.walk(root):
        os.chown(dirpath, uid, uid)
    os.chmod(root, 0o700)
    return root


def scratch_environment(scratch: str) -> Dict[str, str]:
    """Environment variables that point every cache and temp directory into ``scratch``."""
    home, tmp, cache = (os.path.join(scratch, s) for s in ("home", "tmp", "cache"))
    return {"HOME": home, "TMPDIR": tmp, "XDG_CACHE_HOME": cache, "TRITON_HOME": home,
            "TRITON_CACHE_DIR": os.path.join(cache, "triton"), "CUDA_CACHE_PATH": os.path.join(cache, "nv"),
            "TORCH_EXTENSIONS_DIR": os.path.join(cache, "torch_extensions"),
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor")}


def launch_prefix(level: str, plan: Dict[str, Any]) -> List[str]:
    """The command that stands before the worker's ``python -I ...`` (multiprocessing's spawn
    command line with the interpreter flags): the namespaces, then the set-up step as root."""
    setup = [sys.executable, "-I", "-S", os.path.abspath(__file__), json.dumps(plan, sort_keys=True), "--"]
    if level == "full":
        return [shutil.which("unshare") or "unshare", "--mount", "--pid", "--fork", "--kill-child=SIGKILL",
                "--mount-proc", "--"] + setup
    if level == "mount":
        return [shutil.which("unshare") or "unshare", "--mount", "--"] + setup
    if level == "uid":
        return setup
    return []


@dataclass
class Launch:
    """How to start one worker behind a level: the command prefix for ``launch_through``, the
    descriptors it passes, and what the worker's ``self_test`` expects."""

    prefix: List[str]
    pass_fds: List[int]
    expect: Dict[str, Any]
    uid: Optional[int] = None
    scratch: Optional[str] = None


def _readable_copy(path: str) -> str:
    """A byte-identical, world-readable copy of ``path`` made by the parent (the view binds it over
    the original, read-only; the worker still checks the file against its pinned sha256)."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="kw-data-")
    os.chmod(folder, 0o755)
    copy = os.path.join(folder, os.path.basename(path))
    shutil.copyfile(path, copy)
    os.chmod(copy, 0o644)
    return copy


def plan_launch(level: str, device: str, log_fd: Optional[int], hide=(), readonly=(), secret=(),
                taken_uids=(), data=()) -> Launch:
    """Everything a worker behind ``level`` needs: a fresh uid and scratch directory, the view's
    paths (``readable_paths``, plus the folders of the ``data`` files the run's definitions read:
    a definition JSON, safetensors blobs; ``hide``: directories covered by an empty tmpfs), the
    log descriptor the set-up step makes its stdout/stderr, and the self-test's expectations
    (``readonly`` directories, ``secret`` files, and under ``full`` and ``mount`` the ``hide``
    directories, which must not list).  ``none``: nothing (an empty prefix)."""
    if level == "none":
        return Launch([], [], {"level": "none"})
    uid = new_uid(taken_uids)
    scratch = make_scratch(uid)
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    readable = readable_paths()
    data_binds = {}
    for f in data:
        real = os.path.realpath(str(f))
        folder = os.path.dirname(real)
        if os.path.isdir(folder) and folder not in readable:
            readable.append(folder)     # bound back even inside a directory the view replaces (/tmp)
        if os.path.isfile(real) and not os.stat(real).st_mode & 0o004:
            data_binds[real] = _readable_copy(real)   # the worker's uid could not read the original
    plan = {"level": level, "uid": uid, "scratch": scratch, "readable": readable,
            "files": [os.path.realpath(main)] if main and os.path.isfile(main) else [],
            "hide": [os.path.abspath(str(h)) for h in hide], "private_shm": not str(device).startswith("cuda"),
            "log_fd": log_fd, "drop_env": ["KERNELWRIGHT_HIDDEN_SALT"], "data_binds": data_binds}
    expect = {"level": level, "uid": uid, "parent_pid": os.getpid(),
              "parent_ns": {k: os.readlink(f"/proc/self/ns/{k}") for k in ("pid", "mnt")},
              "readonly": list(readonly), "secret": list(secret),
              "hidden": list(plan["hide"]) if level in ("full", "mount") else []}
    return Launch(launch_prefix(level, plan), [log_fd] if log_fd is not None else [], expect, uid, scratch)


def worker_pid_of(level: str, started_pid: int) -> Optional[int]:
    """The worker's pid (in the parent's numbering) given the pid multiprocessing started:
    under ``full`` the worker is its grandchild (``unshare --fork``, then the namespace's init)."""
    return descendant(started_pid, 2) if level == "full" else started_pid


def setpriv_command(uid: int) -> List[str]:
    """The privilege drop, last step before the worker's interpreter (setpriv(1))."""
    return [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


class launch_through:
    """For the duration: multiprocessing's spawn runs ``prefix + [python, "-I", ...]`` instead
    of ``[python, ...]`` (it calls ``multiprocessing.util.spawnv_passfds`` at start, which is
    swapped here).  Callers hold the session's spawn lock: no other spawn runs meanwhile."""

    def __init__(self, prefix: List[str], pass_fds=()):
        self.prefix = list(prefix)
        self.pass_fds = tuple(pass_fds)   # e.g. the worker's log, opened by the parent

    def __enter__(self):
        import multiprocessing.util as util
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()     # the parent's tracker starts unbounded, before the swap
        self._util, self._original = util, util.spawnv_passfds
        prefix, original, extra = self.prefix, self._original, self.pass_fds

        def spawnv_passfds(path, args, passfds):
            args = list(args)
            if "--multiprocessing-fork" not in args:      # not a worker: unchanged
                return original(path, args, passfds)
            command = prefix + [args[0], "-I"] + [a for a in args[1:] if a != "-I"]
            return original(os.fsencode(command[0]), command, tuple(passfds) + extra)

        util.spawnv_passfds = spawnv_passfds
        return self

    def __exit__(self, *exc):
        self._util.spawnv_passfds = self._original
        return False


# -- what the parent sees from outside ------------------------------------------------------------
def observe(pid: int) -> Dict[str, Any]:
    """The worker's credentials and namespaces as the parent reads them from ``/proc/<pid>``:
    {uid, capabilities (the effective set, an int), bounding (the bounding set), no_new_privs,
    pid_namespace, mount_namespace}; empty when the process cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            status = dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)
    except OSError:
        return {}
    seen: Dict[str, Any] = {"uid": int(status.get("Uid", "0").split()[0]),
                            "capabilities": int(status.get("CapEff", "0"), 16),
                            "bounding": int(status.get("CapBnd", "0"), 16),
                            "no_new_privs": status.get("NoNewPrivs", "0").strip() == "1"}
    for ns in ("pid", "mnt"):
        try:
            seen[{"pid": "pid_namespace", "mnt": "mount_namespace"}[ns]] = \
                os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}")
        except OSError:
            seen[{"pid": "pid_namespace", "mnt": "mount_namespace"}[ns]] = None
    return seen


def descendant(pid: int, depth: int) -> Optional[int]:
    """The only descendant ``depth`` generations below ``pid`` (``unshare --fork`` stands
    between the parent and the PID namespace's init, and the init between it and the worker);
    None if there is not exactly one at some step."""
    for _ in range(depth):
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as fh:
                children = [int(x) for x in fh.read().split()]
        except OSError:
            children = _children_by_scan(pid)
        if len(children) != 1:
            return None
        pid = children[0]
    return pid


def _children_by_scan(pid: int) -> List[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


# -- the worker's self-test (before any solution code) ---------------------------------------------
Check = Tuple[str, bool, str]     # (name, held, why not)


def self_test(expect: Dict[str, Any]) -> Dict[str, Any]:
    """Run in the worker before the solution is imported: does the boundary hold?  Each check
    tries what a solution would try and passes only if it is refused.  ``expect``: the plan's
    ``level``, ``uid``, ``parent_pid`` (the parent as the parent's namespace numbers it),
    ``parent_ns`` ({pid, mnt}: the parent's namespace links), ``readonly`` (directories that must
    not be writable), ``secret`` (files that must not be readable), ``hidden`` (directories that
    must not list: absent, or an empty tmpfs it cannot enter).  Returns {passed: [...],
    failed: [...]} (check names, failures with the reason)."""
    level = expect.get("level", "none")
    if level == "none":
        return {"passed": [], "failed": []}
    checks = (_identity_checks(expect) + _parent_checks(expect) + _file_checks(expect)
              + _namespace_checks(level, expect.get("parent_ns") or {}))
    return {"passed": [name for name, ok, _ in checks if ok],
            "failed": [f"{name}: {why}" for name, ok, why in checks if not ok]}


def _identity_checks(expect: Dict[str, Any]) -> List[Check]:
    """Another uid than root and the plan's, no capabilities, no_new_privs."""
    checks = [("uid", os.getuid() == os.geteuid() == expect.get("uid") and os.getuid() != 0,
               f"uid {os.getuid()}, euid {os.geteuid()}")]
    try:
        with open("/proc/self/status") as fh:
            status = dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)
        checks.append(("no capabilities", int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0,
                       f"CapEff {status.get('CapEff')}, CapBnd {status.get('CapBnd')}"))
        checks.append(("no_new_privs", status.get("NoNewPrivs", "0").strip() == "1", "NoNewPrivs is 0"))
    except (OSError, KeyError, ValueError) as exc:
        checks.append(("no capabilities", False, f"cannot read /proc/self/status: {exc}"))
    return checks


def _parent_checks(expect: Dict[str, Any]) -> List[Check]:
    """The parent's memory (read-write) and environment (read) cannot be opened, by its pid in
    either namespace."""
    checks = []
    for pid in {os.getppid(), int(expect.get("parent_pid") or 0)} - {0}:
        for what, flags in (("mem", os.O_RDWR), ("environ", os.O_RDONLY)):
            path = f"/proc/{pid}/{what}"
            try:
                fd = os.open(path, flags)
            except OSError:
                checks.append((f"parent {what} refused ({pid})", True, ""))
                continue
            try:
                leaked = os.read(fd, 64) if what == "environ" else b"opened"
            except OSError:
                leaked = b""
            os.close(fd)
            checks.append((f"parent {what} refused ({pid})", not leaked, f"{path} opened"))
    return checks


def _file_checks(expect: Dict[str, Any]) -> List[Check]:
    """Read-only directories refuse a new file, secrets refuse a read, hidden directories list
    nothing, and the scratch directory ($TMPDIR) takes a file."""
    checks = []
    for directory in expect.get("readonly") or []:
        probe = os.path.join(directory, f".kw-boundary-probe-{os.getpid()}")
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            checks.append((f"read-only {directory}", True, ""))
            continue
        os.close(fd)
        os.unlink(probe)
        checks.append((f"read-only {directory}", False, "a file could be created"))
    for path in expect.get("secret") or []:
        try:
            with open(path, "rb") as fh:
                fh.read(1)
            checks.append((f"unreadable {path}", False, "readable"))
        except OSError:
            checks.append((f"unreadable {path}", True, ""))
    for directory in expect.get("hidden") or []:
        try:
            listed = os.listdir(directory)
        except OSError:
            listed = []
        checks.append((f"hidden {directory}", not listed, f"lists {sorted(listed)[:3]}"))
    probe = os.path.join(os.environ.get("TMPDIR") or "/tmp", f".kw-scratch-probe-{os.getpid()}")
    try:
        with open(probe, "w") as fh:
            fh.write("ok")
        os.unlink(probe)
        checks.append(("scratch writable", True, ""))
    except OSError as exc:
        checks.append(("scratch writable", False, str(exc)))
    return checks


def _namespace_checks(level: str, parent_ns: Dict[str, str]) -> List[Check]:
    """Its own mount namespace (levels full and mount) and PID namespace (full)."""
    checks = []
    for kind, needed in (("mnt", level in ("full", "mount")), ("pid", level == "full")):
        if needed and parent_ns.get(kind):
            try:
                own = os.readlink(f"/proc/self/ns/{kind}")
            except OSError as exc:
                own = f"unreadable: {exc}"
            checks.append((f"own {kind} namespace", own != parent_ns[kind], f"{own} is the parent's"))
    return checks


# -- the set-up step (runs as root, as a script: python -I -S sandbox.py PLAN -- COMMAND...) ------
_AT_FDCWD = -100
_AT_EMPTY_PATH = 0x1000
_AT_RECURSIVE = 0x8000
_OPEN_TREE_CLONE = 1
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID = 0x1, 0x2
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442   # the same on every architecture
_MS_NOSUID, _MS_NODEV = 2, 4


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


class _Mounts:
    """mount(2), open_tree(2), move_mount(2) and mount_setattr(2) through libc (Python 3.11 has
    no wrappers).  Every failure raises OSError with the call and the path."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

    def _fail(self, what: str, path: str):
        err = ctypes.get_errno()
        raise OSError(err, f"{what} {path}: {os.strerror(err)}")

    def tmpfs(self, target: str, mode: str) -> None:
        if self.libc.mount(b"tmpfs", target.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                           f"mode={mode},size=64m".encode()) != 0:
            self._fail("mount tmpfs on", target)

    def clone(self, path: str) -> int:
        fd = self.libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, path.encode(),
                               _OPEN_TREE_CLONE | _AT_RECURSIVE | os.O_CLOEXEC)
        if fd < 0:
            self._fail("open_tree", path)
        return fd

    def attach(self, tree: int, target: str) -> None:
        if self.libc.syscall(_SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, target.encode(), _MOVE_MOUNT_F_EMPTY_PATH) != 0:
            self._fail("move_mount to", target)
        os.close(tree)

    def attributes(self, path: str, set_: int = 0, clear: int = 0, recursive: bool = True) -> None:
        attr = _MountAttr(set_, clear, 0, 0)
        flags = _AT_RECURSIVE if recursive else 0
        if self.libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path.encode(), flags, ctypes.byref(attr),
                             ctypes.sizeof(attr)) != 0:
            self._fail("mount_setattr", path)


def _enterable(path: str, uid: int) -> bool:
    st = os.stat(path)
    if st.st_uid == uid:
        return bool(st.st_mode & 0o100)
    return bool(st.st_mode & 0o001)


def _blocked_ancestor(path: str, uid: int) -> Optional[str]:
    """The outermost directory on the way to ``path`` (``path`` excluded) that ``uid`` cannot
    enter, or None.  A closed directory is replaced by a tmpfs holding only what the worker must
    read under it; a closed ``path`` itself by an empty one."""
    parts = path.strip("/").split("/")
    current = ""
    for part in parts[:-1]:
        current += "/" + part
        if not _enterable(current, uid):
            return current
    return None


def build_view(plan: Dict[str, Any]) -> None:
    """The worker's file-system view, in a fresh mount namespace (see the module docstring).
    Directories replaced by a tmpfs: those the worker's uid cannot enter on the way to what it
    must read, and ``/tmp`` and ``/var/tmp``; what the worker must read under them is bound back
    (read-only), and the scratch directory (writable).

    Raises:
        OSError: a mount step failed (the session then tries the next level).
    """
    m = _Mounts()
    uid = int(plan["uid"])
    scratch = plan["scratch"]
    readable = [p for p in plan["readable"] if os.path.isdir(p)]
    temporary = [t for t in ("/tmp", "/var/tmp") if os.path.isdir(t) and not os.path.islink(t)]
    replaced: Dict[str, str] = {t: "1777" for t in temporary}
    for p in readable:
        closed = _blocked_ancestor(p, uid)
        if closed is None and not (_enterable(p, uid) and os.stat(p).st_mode & 0o004):
            closed = p                 # the directory itself (a working directory such as /root)
        if closed is not None:
            replaced.setdefault(closed, "0755")

    def inside(path: str, top: str) -> bool:
        return path == top or path.startswith(top.rstrip("/") + "/")

    outermost = [r for r in replaced if not any(r != o and inside(r, o) for o in replaced)]
    # a directory closed to the worker's uid itself (a 0700 working directory) stays an empty one
    closed_self = {p for p in readable if not (_enterable(p, uid) and os.stat(p).st_mode & 0o004)}
    back = [p for p in readable if p not in closed_self and any(inside(p, r) and p != r for r in outermost)]
    back = [p for p in back if not any(p != q and inside(p, q) for q in back)]
    scratch_tree = m.clone(scratch)
    trees = {p: m.clone(p) for p in back}
    data_trees = {orig: m.clone(copy) for orig, copy in (plan.get("data_binds") or {}).items()}
    file_trees = {f: m.clone(f) for f in plan.get("files") or [] if os.path.isfile(f)
                  and any(inside(f, r) for r in outermost) and not any(inside(f, p) for p in back)}
    for r in sorted(outermost, key=len):
        m.tmpfs(r, replaced[r])
    for p in sorted(trees, key=len):
        os.makedirs(p, mode=0o755, exist_ok=True)
        m.attach(trees[p], p)
    for p in closed_self:
        if any(inside(p, r) and p != r for r in outermost):
            os.makedirs(p, mode=0o755, exist_ok=True)
    for orig, tree in data_trees.items():     # data files the worker's uid could not read: the copies
        if os.path.exists(orig):
            m.attach(tree, orig)
        else:
            os.close(tree)
    # single files the worker must read whose directory was replaced without being bound back
    # (the parent's __main__ script directly in /tmp: spawn runs it again in the worker)
    for f, tree in file_trees.items():
        if not os.path.exists(f):
            os.makedirs(os.path.dirname(f), mode=0o755, exist_ok=True)
            open(f, "a").close()
            m.attach(tree, f)
        else:
            os.close(tree)
    # what must stay hidden, where the view still shows it (the mounts above are in place: a folder
    # in a replaced directory is absent unless a readable path bound back holds it)
    for hidden in plan.get("hide") or []:
        if os.path.isdir(hidden) and not any(inside(p, hidden) for p in readable):
            m.tmpfs(hidden, "0000")
    m.attributes("/", set_=_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID)
    for writable in ["/proc"] + [t for t in temporary if t in outermost]:
        m.attributes(writable, clear=_MOUNT_ATTR_RDONLY, recursive=False)
    if plan.get("private_shm", True):
        if os.path.isdir("/dev/shm"):
            m.tmpfs("/dev/shm", "1777")
    elif os.path.isdir("/dev/shm"):
        m.attributes("/dev/shm", clear=_MOUNT_ATTR_RDONLY, recursive=False)
    os.makedirs(scratch, mode=0o700, exist_ok=True)
    m.attach(scratch_tree, scratch)


def _serve_as_init(child: int) -> None:
    """PID 1 of the worker's namespace: reap every orphan, exit with the worker's status (the
    kernel then kills whatever is left in the namespace)."""
    os.closerange(3, 1 << 16)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(70)
        except InterruptedError:
            continue
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def _main(argv: List[str]) -> None:
    plan = json.loads(argv[1])
    command = argv[argv.index("--") + 1:]
    level = plan["level"]
    log_fd = plan.get("log_fd")
    if log_fd is not None:   # opened by the parent (a file opened in this namespace would keep "/" writable)
        os.dup2(int(log_fd), 1)
        os.dup2(int(log_fd), 2)
        os.close(int(log_fd))
    env = dict(os.environ)
    for name in plan.get("drop_env") or []:
        env.pop(name, None)
    env.update(scratch_environment(plan["scratch"]))
    if level in ("full", "mount"):
        build_view(plan)
    os.chdir("/")
    full = setpriv_command(int(plan["uid"])) + command
    if level == "full":
        child = os.fork()
        if child:
            _serve_as_init(child)
    os.execve(full[0], full, env)


if __name__ == "__main__":
    try:
        _main(sys.argv)
    except Exception as exc:   # the session falls back to the next level and reports this line
        sys.stderr.write(f"kernelwright boundary set-up failed: {type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        os._exit(70)
