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
    peer = wire.Peer()
    probe = torch.zeros(1).share_memory_()
    wire.safe_loads(_forking_dumps({"ready": True, "probe": probe}), peer)   # learns the address
    assert peer.sharer_address is not None and not peer.learning
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).share_memory_()
    back = wire.safe_loads(_forking_dumps({"sets": [[t]]}), peer)["sets"][0][0]
    assert torch.equal(back, t)
    back[0, 0] = 42.0                     # the same shared storage, not a copy
    assert t[0, 0].item() == 42.0
    with pytest.raises(wire.ForbiddenGlobal):   # no peer: no shared-memory CPU tensor at all
        wire.safe_loads(_forking_dumps({"sets": [[t]]}))


def test_a_handle_at_another_address_is_refused_without_connecting():
    from multiprocessing.resource_sharer import DupFd

    peer = wire.Peer()
    wire.safe_loads(_forking_dumps({"probe": torch.zeros(1).share_memory_()}), peer)
    forged = DupFd.__new__(DupFd)
    forged._id = ("/tmp/kw-no-such-socket", 1)          # would stall or fail if the parent connected
    class _Handle:
        def __reduce__(self):
            return (torch.multiprocessing.reductions.rebuild_storage_fd, (torch.UntypedStorage, forged, 4))

    payload = pickle.dumps({"sets": _Handle()}, protocol=2)
    with pytest.raises(wire.ForbiddenGlobal, match="not this worker's"):
        wire.safe_loads(payload, peer)


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
