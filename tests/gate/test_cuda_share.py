"""CUDA buffers shared as file descriptors (gate/cuda_share.py): the message plumbing, on the CPU.

The driver's part (``cuMemCreate``, export, import, map) needs a GPU; here a memfd stands in for
the allocation, so what is tested is the rest: one descriptor per allocation, handed over by the
resource sharer and fetched through ``wire.fetch_fd``, views at their offsets on the other side,
records that name no allocation refused.  On the H200: ``KERNELWRIGHT_CUDA_SHARING=fd`` with
``tests/gate/test_boundary_gpu.py``."""

import mmap
import os
from multiprocessing.reduction import ForkingPickler
from multiprocessing.resource_sharer import DupFd

import pytest
import torch

from kernelwright.gate import cuda_share, wire


class _MemfdMapping:
    """A memfd in place of a VMM allocation: the same interface as ``cuda_share._Mapping``."""

    alive: list = []          # the real mapping is kept alive by its views' owners; this one here

    def __init__(self, fd: int, size: int):
        self.fd, self.size, self.ptr, self.device = fd, size, 0, 0
        self.mm = mmap.mmap(fd, size)
        self.alive.append(self)

    @classmethod
    def allocate(cls, nbytes, device):
        fd = os.memfd_create("kw-test")
        os.ftruncate(fd, nbytes)
        return cls(fd, nbytes)

    @classmethod
    def import_fd(cls, fd, size, device):
        return cls(os.dup(fd), size)

    def export_fd(self):
        return os.dup(self.fd)

    def view(self, offset, shape, dtype):
        nbytes = cuda_share._nbytes(shape, dtype)
        t = torch.frombuffer(self.mm, dtype=torch.uint8, count=max(nbytes, 1), offset=offset)[:nbytes]
        t = t.view(dtype).reshape(shape)
        self.ptr = t.untyped_storage().data_ptr() - offset
        cuda_share._MAPPINGS[t.untyped_storage().data_ptr()] = self
        return t


@pytest.fixture
def memfd(monkeypatch):
    monkeypatch.setattr(cuda_share, "_Mapping", _MemfdMapping)


def _through_the_pipe(message, peer, mode="fd"):
    return cuda_share.open_tree(wire.safe_loads(bytes(ForkingPickler.dumps(message)), peer),
                                lambda df: wire.fetch_fd(df, peer), mode)


def test_buffers_cross_as_one_descriptor_and_come_back_as_views(memfd):
    a, b = cuda_share.allocate_views([((4,), torch.float32), ((2, 3), torch.int32)], torch.device("cuda", 0))
    a.fill_(7.0)
    b.copy_(torch.arange(6, dtype=torch.int32).reshape(2, 3))
    peer = wire.Peer()
    message = cuda_share.share_tree({"ok": True, "probe": wire.sealed_shared_tensor((1,), torch.float32).zero_(),
                                     "sets": [{"inputs": [a], "outputs": [b]}]}, DupFd)
    assert len(message[cuda_share.CUDA_ALLOCATIONS]) == 1          # one allocation, one descriptor
    views = message["sets"][0]["inputs"][0], message["sets"][0]["outputs"][0]
    assert views[0]["offset"] == 0 and views[1]["offset"] == 256 and views[1]["shape"] == [2, 3]
    got = _through_the_pipe(message, peer)
    ga, gb = got["sets"][0]["inputs"][0], got["sets"][0]["outputs"][0]
    assert torch.equal(ga, a) and torch.equal(gb, b) and cuda_share.CUDA_ALLOCATIONS not in got
    gb.fill_(-1)                                                    # the same memory on both sides
    assert bool((b == -1).all())


def test_a_view_of_an_allocation_the_message_does_not_carry_is_refused(memfd):
    (a,) = cuda_share.allocate_views([((4,), torch.float32)], torch.device("cuda", 0))
    peer = wire.Peer()
    message = cuda_share.share_tree({"probe": wire.sealed_shared_tensor((1,), torch.float32).zero_(), "t": a}, DupFd)
    message["t"][cuda_share.CUDA_VIEW] = 999
    with pytest.raises(ValueError, match="does not carry"):
        _through_the_pipe(message, peer)


def test_descriptors_in_a_message_of_an_ipc_run_are_refused(memfd):
    (a,) = cuda_share.allocate_views([((4,), torch.float32)], torch.device("cuda", 0))
    message = cuda_share.share_tree({"probe": wire.sealed_shared_tensor((1,), torch.float32).zero_(), "t": a}, DupFd)
    with pytest.raises(cuda_share.UnexpectedDescriptors):
        _through_the_pipe(message, wire.Peer(), mode="ipc")


def test_a_cuda_tensor_outside_the_shareable_allocations_is_an_error():
    class Fake(torch.Tensor):
        is_cuda = True

    with pytest.raises(ValueError, match="outside the worker's shareable allocations"):
        cuda_share.share_tree({"t": torch.zeros(2).as_subclass(Fake)}, DupFd)


def test_the_sharing_mode_is_fd_where_the_driver_bindings_import(monkeypatch):
    assert cuda_share.sharing_mode("IPC") == "ipc" and cuda_share.sharing_mode("FD") == "fd"
    monkeypatch.setattr(cuda_share, "_default_mode", lambda: "fd")
    assert cuda_share.sharing_mode("") == "fd"
    monkeypatch.delenv(cuda_share.MODE_ENV, raising=False)
    assert cuda_share.sharing_mode() == "fd"
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.undo()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cuda.bindings" else real(name, *a))
    assert cuda_share._default_mode() == "ipc"
    with pytest.raises(ValueError, match="KERNELWRIGHT_CUDA_SHARING"):
        cuda_share.sharing_mode("shm")


def test_one_deadline_covers_every_hand_over_of_a_message():
    """A worker that answers each hand-over just inside the limit cannot stall the parent once
    per handle: the second slow fetch of a message gets what is left of the first's deadline."""
    import time

    peer = wire.Peer()
    peer.deadline = time.monotonic() + 0.3
    assert wire._with_deadline(lambda: time.sleep(0.2) or 1, peer) == 1
    started = time.monotonic()
    with pytest.raises(wire.ForbiddenGlobal, match="did not hand over"):
        wire._with_deadline(lambda: time.sleep(1.0) or 2, peer)
    assert time.monotonic() - started < 0.5


def test_a_message_with_two_allocations_is_refused(memfd):
    """Two descriptors would map one allocation at two addresses, aliasing buffers the parent's
    address checks see apart: a message carries at most one allocation."""
    (a,) = cuda_share.allocate_views([((4,), torch.float32)], torch.device("cuda", 0))
    (b,) = cuda_share.allocate_views([((4,), torch.float32)], torch.device("cuda", 0))
    message = cuda_share.share_tree({"probe": wire.sealed_shared_tensor((1,), torch.float32).zero_(), "t": [a, b]}, DupFd)
    assert len(message[cuda_share.CUDA_ALLOCATIONS]) == 2
    with pytest.raises(cuda_share.UnexpectedDescriptors, match="2 CUDA allocations"):
        _through_the_pipe(message, wire.Peer())
