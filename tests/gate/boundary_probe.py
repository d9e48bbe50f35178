"""What a solution would try against the gate's parent, run inside a bounded child
(tests/gate/test_boundary.py).  Every attempt is recorded as {name: "ok" | error}: "ok" means the
attempt SUCCEEDED (a hole)."""

import ctypes
import os


def _attempt(results, name, fn):
    try:
        fn()
        results[name] = "ok"
    except OSError as exc:
        results[name] = f"{type(exc).__name__}: errno {exc.errno}"


def attack(conn, targets):
    results = {}
    parent = targets["parent_pid"]

    def read_mem():
        fd = os.open(f"/proc/{parent}/mem", os.O_RDWR)
        os.close(fd)

    def read_environ():
        with open(f"/proc/{parent}/environ", "rb") as fh:
            if not fh.read():
                raise OSError(0, "empty")

    def ptrace_root_process():
        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_SEIZE = 0x4206
        if libc.ptrace(PTRACE_SEIZE, targets["root_pid"], None, None) != 0:
            raise OSError(ctypes.get_errno(), "ptrace")
        # attached: a hole (the child exits right after, which detaches)

    def signal_parent():
        os.kill(parent, 0)

    def write_to(path):
        def write():
            probe = os.path.join(path, f".kw-probe-{os.getpid()}")
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(fd)
            os.unlink(probe)
        return write

    def read_secret():
        with open(targets["secret"], "rb") as fh:
            fh.read()

    _attempt(results, "parent mem", read_mem)
    _attempt(results, "parent environ", read_environ)
    _attempt(results, "ptrace a root process", ptrace_root_process)
    _attempt(results, "signal the parent", signal_parent)
    for name, path in targets["writes"].items():
        _attempt(results, f"write {name}", write_to(path))
    def read_results_folder():
        folder = targets["results"]
        if not os.listdir(folder):
            raise OSError(0, "empty")
        with open(os.path.join(folder, "summary.json"), "rb") as fh:
            fh.read()

    _attempt(results, "read the salt", read_secret)
    if targets.get("results"):
        _attempt(results, "read the results folder", read_results_folder)
    if targets.get("expect"):
        from kernelwright.gate import sandbox

        results["self_test_failed"] = sandbox.self_test(targets["expect"])["failed"]
    _attempt(results, "write scratch", write_to(os.environ.get("TMPDIR", "/tmp")))
    results["uid"] = os.getuid()
    conn.send(results)
    conn.recv()
