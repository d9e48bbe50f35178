"""The parent's unpickler for worker messages (gate/wire.py)."""
import io
import os
import pickle
from multiprocessing.reduction import ForkingPickler

import pytest
import torch

from kernelwright.gate import wire


def _forking_dumps(obj) -> bytes:
    buf = io.BytesIO()
    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def test_plain_messages_and_dtypes_round_trip():
    msg = {"ok": True, "samples": {"latency_ms": [0.1, 0.2]}, "dtype": torch.float8_e4m3fn,
           "shape": torch.Size([2, 3]), "device": torch.device("cpu"), "none": None, "t": (1, "x")}
    assert wire.safe_loads(pickle.dumps(msg)) == msg


def test_shared_memory_tensors_rebuild():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).share_memory_()
    back = wire.safe_loads(_forking_dumps({"sets": [[t]]}))["sets"][0][0]
    assert torch.equal(back, t)
    back[0, 0] = 42.0                     # the same shared storage, not a copy
    assert t[0, 0].item() == 42.0


class _Exec:
    def __reduce__(self):
        return (exec, ("import os",))


class _System:
    def __reduce__(self):
        return (os.system, ("true",))


@pytest.mark.parametrize("evil", [_Exec(), _System(), getattr])
def test_code_naming_globals_are_refused(evil):
    with pytest.raises(wire.ForbiddenGlobal):
        wire.safe_loads(pickle.dumps({"ok": True, "x": evil}))
