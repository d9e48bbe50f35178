"""Code execution in the trusted parent (found by the 2026-11-29 red-team review).  The parent
used to read replies with ``Connection.recv()``, i.e. ``pickle.loads``, and a pickle may name any
callable.  On its first call this solution finds the worker's pipe (the harness's connection,
through ``gc``) and sends an object whose ``__reduce__`` is ``exec`` of a payload that, in the
parent, would make every correctness check pass.  It computes nothing.  Expected: GATE_TAMPERED
(the parent unpickles worker messages with an allow-list, ``gate/wire.py``: ``builtins.exec`` is
refused before anything runs, and the worker is killed).
"""

import gc

_PAYLOAD = (
    "from kernelwright.gate import checkers, evaluate\n"
    "from kernelwright.trace import EvaluationStatus\n"
    "evaluate.check_outputs = lambda *a, **k: checkers.CheckResult(EvaluationStatus.PASSED)\n"
)


class _RunsInParent:
    def __reduce__(self):
        return (exec, (_PAYLOAD,))


_sent = []


def run(x, weight, eps, y):
    if _sent:
        return
    for obj in gc.get_objects():
        conn = getattr(obj, "_conn", None) if type(obj).__name__ == "Harness" else None
        if conn is not None:
            conn.send(_RunsInParent())
            _sent.append(1)
            return
