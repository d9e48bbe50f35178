"""The parent's unpickler for worker messages (gate/wire.py)."""
import io
import multiprocessing
import os
import pickle
import struct
import threading
import time
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
    probe = wire.sealed_shared_tensor((1,), torch.float32).zero_()
    wire.safe_loads(_forking_dumps({"ready": True, "probe": probe}), peer)   # learns the address
    assert peer.sharer_address is not None and not peer.learning
    t = wire.sealed_shared_tensor((2, 3), torch.float32)
    t.copy_(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    back = wire.safe_loads(_forking_dumps({"sets": [[t]]}), peer)["sets"][0][0]
    assert torch.equal(back, t)
    back[0, 0] = 42.0                     # the same shared storage, not a copy
    assert t[0, 0].item() == 42.0
    with pytest.raises(wire.ForbiddenGlobal):   # no peer: no shared-memory CPU tensor at all
        wire.safe_loads(_forking_dumps({"sets": [[t]]}))


def test_only_buffers_sealed_against_shrinking_are_mapped():
    """A worker that truncated a buffer's file under the parent's mapping made the parent's next
    touch a SIGBUS (red-team case ``shrink_buffer``): the harness's buffers are sealed memfds,
    which cannot shrink, and the parent maps nothing else."""
    peer = wire.Peer()
    wire.safe_loads(_forking_dumps({"ready": True, "probe": wire.sealed_shared_tensor((1,), torch.float32)}), peer)
    sealed = wire.sealed_shared_tensor((4, 8), torch.bfloat16)
    fd, _ = sealed.untyped_storage()._share_fd_cpu_()
    with pytest.raises(PermissionError):
        os.ftruncate(fd, 0)
    assert sealed.is_contiguous() and list(sealed.shape) == [4, 8]
    back = wire.safe_loads(_forking_dumps({"sets": [[sealed]]}), peer)["sets"][0][0]
    back.fill_(2.0)
    assert float(sealed.float().sum()) == 64.0
    plain = torch.zeros(4, 8).share_memory_()           # torch's /dev/shm file: shrinkable
    with pytest.raises(wire.ForbiddenGlobal, match="not sealed against shrinking"):
        wire.safe_loads(_forking_dumps({"sets": [[plain]]}), peer)
    import fcntl

    short = os.memfd_create("short", os.MFD_ALLOW_SEALING)   # sealed, but smaller than it claims
    try:
        os.ftruncate(short, 8)
        fcntl.fcntl(short, wire._F_ADD_SEALS, wire.REQUIRED_SEALS)
        assert wire._sealed_problem(short, 8) is None
        assert "of 64 bytes in a file of 8" in wire._sealed_problem(short, 64)
    finally:
        os.close(short)


def test_a_handle_at_another_address_is_refused_without_connecting():
    from multiprocessing.resource_sharer import DupFd

    peer = wire.Peer()
    wire.safe_loads(_forking_dumps({"probe": wire.sealed_shared_tensor((1,), torch.float32).zero_()}), peer)
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


def test_each_host_op_is_on_the_pipe_before_the_call_returns_and_the_parent_tallies_it():
    """The host-op recorder keeps no tally in the worker (red-team case ``recorder_tally_erase``:
    a solution cleared that dict before the reply took it): each op goes out as it runs, and the
    parent accepts only records of the recorder's own shape (``session._tally_host_op``)."""
    from multiprocessing import Pipe

    from kernelwright.gate.session import _tally_host_op
    from kernelwright.gate.worker import HostOpRecorder, LaunchCounter, _raw_pipe

    parent, child = Pipe()
    send, _ = _raw_pipe(child)
    x = torch.ones(64)
    with HostOpRecorder(LaunchCounter(), lambda *record: send({"host_op": record})):
        (x * 2).sum()
        assert parent.poll(0)                 # already sent, inside the call
    ops = {}
    while parent.poll(0):
        assert _tally_host_op(ops, wire.safe_loads(wire.recv_frame(parent)))
    assert ops["torch::mul"][0] == 1 and ops["torch::mul"][2] == 64 and ops["torch::sum"][0] == 1
    for forged in ({"host_op": ("torch::mul", 1.0, 64), "ok": True}, {"host_op": ["torch::mul", 1.0, 64]},
                   {"host_op": ("torch::mul", 1, 64)}, {"host_op": ("torch::mul", 1.0, -64)}):
        assert not _tally_host_op({}, forged)


def test_frames_are_read_whole_with_connections_framing():
    parent, child = multiprocessing.Pipe()
    big = {"blob": b"x" * (3 << 20)}                     # larger than one read and the pipe's buffer
    sender = threading.Thread(target=child.send_bytes, args=(pickle.dumps(big),))
    sender.start()
    assert parent.poll(5) and wire.safe_loads(wire.recv_frame(parent)) == big
    sender.join()
    os.write(child.fileno(), struct.pack("!i", -1) + struct.pack("!Q", 5) + b"hello")   # the long form
    assert wire.recv_frame(parent) == b"hello"


def test_a_forged_frame_cannot_hold_the_parent():
    """A header that claims more than arrives (case stalled_frame) and one over the length limit
    are refused within the deadline, instead of recv_bytes waiting for ever."""
    parent, child = multiprocessing.Pipe()
    os.write(child.fileno(), struct.pack("!i", 1 << 20) + b"\x80")
    started = time.monotonic()
    with pytest.raises(wire.ForbiddenGlobal, match="stopped arriving: 1 of 1048576 bytes"):
        wire.recv_frame(parent, deadline_s=0.5)
    assert time.monotonic() - started < 3
    parent, child = multiprocessing.Pipe()
    os.write(child.fileno(), struct.pack("!i", -1) + struct.pack("!Q", 1 << 40))
    with pytest.raises(wire.ForbiddenGlobal, match="over|at most"):
        wire.recv_frame(parent)
    child.close()
    with pytest.raises(EOFError):
        wire.recv_frame(parent)
