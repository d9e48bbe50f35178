"""What the parent accepts from a worker's pipe: pickles that can only rebuild data and shared
tensors, never call arbitrary code in the parent.

``multiprocessing.Connection.recv()`` unpickles whatever arrives, and a pickle can name any
importable callable (``builtins.eval``, ``os.system``) through its ``__reduce__``.  The worker runs
untrusted solution code in its own process, and that code can write to the pipe (it finds the
connection through ``gc``), so a plain ``recv()`` in the parent would run the solution's code in
the process that holds the references and decides the verdicts (red-team case
``pickle_parent``).  ``safe_recv`` reads the raw bytes and unpickles them with an allow-list:
containers and scalars (pickle opcodes, no lookup), torch dtypes, ``torch.Size`` and
``torch.device``, tensor and storage classes, and the rebuild functions of
``torch.multiprocessing.reductions`` that turn shared-memory and CUDA-IPC handles back into tensors
(a shared-memory handle only from this worker's resource sharer, see ``Peer``; the file-name
strategy, whose handle names a manager socket, not at all).  Anything else raises
``ForbiddenGlobal``, which the session reports as tampering.
"""

from __future__ import annotations

import fcntl
import io
import math
import os
import pickle
import select
import struct
import threading
import time
from typing import Any, FrozenSet, Optional, Tuple

import torch


class ForbiddenGlobal(pickle.UnpicklingError):
    """A worker message named a global outside the allow-list (or misused an allowed one)."""


class Peer:
    """What the parent knows about one worker: the address of its resource sharer, learned from
    the worker's ``ready`` message (sent before any solution code is imported).  Shared-memory CPU
    tensors arrive as a ``DupFd`` whose address the parent connects to while unpickling; a forged
    one could point anywhere and stall the parent forever (red-team case ``foreign_handle``), so later
    messages may only name this address, and the fetch has a deadline."""

    def __init__(self) -> None:
        self.sharer_address: Any = None
        self.learning = True     # the first message (ready) teaches the address
        # when the current message's hand-overs must be done (``safe_loads`` sets it): one
        # deadline per message, so a message with K handles cannot stall the parent K times
        self.deadline = math.inf


_FETCH_DEADLINE_S = 30.0


def _sharer_reference(df: Any, peer: Peer) -> None:
    """Check that ``df`` is a resource-sharer reference at this worker's address (the first
    message teaches the address).

    Raises:
        ForbiddenGlobal: anything else.
    """
    from multiprocessing.resource_sharer import DupFd

    ident = getattr(df, "_id", None) if type(df) is DupFd else None
    address = ident[0] if isinstance(ident, tuple) and len(ident) == 2 else None
    if address is None:
        raise ForbiddenGlobal("a shared-memory handle that is not a resource-sharer reference")
    if peer.learning and peer.sharer_address is None:
        peer.sharer_address = address
    if address != peer.sharer_address:
        raise ForbiddenGlobal(f"a shared-memory handle at {address!r}, not this worker's resource sharer")


def _with_deadline(fetch, peer: Peer):
    """``fetch()`` in a daemon thread, given what is left of the message's deadline
    (``Peer.deadline``, at most ``_FETCH_DEADLINE_S``).

    Raises:
        ForbiddenGlobal: the worker's resource sharer did not answer in time.
    """
    result: list = []
    worker = threading.Thread(target=lambda: result.append(fetch()), daemon=True)
    worker.start()
    worker.join(max(0.0, min(peer.deadline - time.monotonic(), _FETCH_DEADLINE_S)))
    if not result:
        raise ForbiddenGlobal(f"the worker's resource sharer did not hand over a buffer within the message's {_FETCH_DEADLINE_S:.0f} s")
    return result[0]


def fetch_fd(df: Any, peer: Peer) -> int:
    """A file descriptor the worker handed over: ``df`` (a ``DupFd``) checked to be this
    worker's resource-sharer reference, then fetched from it with a deadline (CUDA buffers
    shared as descriptors, gate/cuda_share.py).

    Raises:
        ForbiddenGlobal: not this worker's reference, or no answer in time.
    """
    _sharer_reference(df, peer)
    return int(_with_deadline(df.detach, peer))


# what a shared-memory CPU buffer's file must be sealed with before the parent maps it: a worker
# that shrinks the file under the parent's mapping (``ftruncate``) makes the parent's next touch of
# the buffer a SIGBUS, killing the trusted process and every verdict of the run (case
# ``shrink_buffer``); the file of ``torch.Tensor.share_memory_`` (an unlinked ``/dev/shm`` file) cannot be
# sealed, a memfd can, and a seal cannot be taken back
REQUIRED_SEALS = (getattr(fcntl, "F_SEAL_SHRINK", 0x2) | getattr(fcntl, "F_SEAL_SEAL", 0x1))
_F_GET_SEALS = getattr(fcntl, "F_GET_SEALS", 1034)
_F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)


def sealed_shared_tensor(shape, dtype: torch.dtype) -> torch.Tensor:
    """Worker side: an empty CPU tensor in shared memory whose file (a memfd) is sealed against
    shrinking (``REQUIRED_SEALS``), so that the parent's mapping of it stays valid whatever the
    worker does; it pickles like any shared-memory tensor (a ``DupFd`` of the file)."""
    numel = 1
    for n in shape:
        numel *= int(n)
    nbytes = max(1, numel * torch.empty((), dtype=dtype).element_size())
    fd = os.memfd_create("kernelwright-buffer", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, nbytes)
        fcntl.fcntl(fd, _F_ADD_SEALS, REQUIRED_SEALS | getattr(fcntl, "F_SEAL_GROW", 0x4))
        storage = torch.UntypedStorage._new_shared_fd_cpu(fd, nbytes)   # maps a dup of fd
    finally:
        os.close(fd)
    t = torch.empty((0,), dtype=dtype)
    return t.set_(storage, 0, tuple(int(n) for n in shape), torch.empty(tuple(int(n) for n in shape), device="meta").stride())


def _sealed_problem(fd: int, size: int) -> Optional[str]:
    """Why the parent must not map ``size`` bytes of ``fd``, or None."""
    try:
        seals = fcntl.fcntl(fd, _F_GET_SEALS)
    except OSError:
        return "a shared-memory buffer whose file cannot be sealed (not a memfd)"
    if seals & REQUIRED_SEALS != REQUIRED_SEALS:
        return f"a shared-memory buffer whose file is not sealed against shrinking (seals {seals:#x})"
    if os.fstat(fd).st_size < int(size):
        return f"a shared-memory buffer of {size} bytes in a file of {os.fstat(fd).st_size}"
    return None


def _guarded_rebuild_storage_fd(peer: Peer):
    from torch.multiprocessing.reductions import StorageWeakRef, fd_id, shared_cache, storage_from_cache

    def fetch(cls, df, size):
        """torch's ``rebuild_storage_fd`` with the seals checked before the file is mapped;
        returns the storage or the reason it was refused."""
        fd = df.detach()
        try:
            problem = _sealed_problem(fd, size)
            if problem is not None:
                return ForbiddenGlobal(problem)
            storage = storage_from_cache(cls, fd_id(fd))
            if storage is not None:
                return storage
            storage = cls._new_shared_fd_cpu(fd, size)
            shared_cache[fd_id(fd)] = StorageWeakRef(storage)
            return storage
        finally:
            os.close(fd)

    def rebuild(cls, df, size):
        _sharer_reference(df, peer)
        got = _with_deadline(lambda: fetch(cls, df, size), peer)
        if isinstance(got, ForbiddenGlobal):
            raise got
        return got

    return rebuild


_ALLOWED: FrozenSet[Tuple[str, str]] = frozenset(
    [("torch.multiprocessing.reductions", name) for name in (
        "rebuild_tensor", "rebuild_cuda_tensor",
        "rebuild_storage_empty", "rebuild_typed_storage", "rebuild_typed_storage_child", "rebuild_event")]
    + [("torch", name) for name in ("Tensor", "Size", "device", "UntypedStorage", "TypedStorage")]
    + [("torch.storage", name) for name in ("UntypedStorage", "TypedStorage")]
    + [("torch.nn.parameter", "Parameter"), ("torch._utils", "_rebuild_tensor"),
       ("torch._utils", "_rebuild_tensor_v2"), ("multiprocessing.resource_sharer", "DupFd"),
       ("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"),
       ("builtins", "complex"), ("builtins", "slice"), ("builtins", "bytearray")]
)


class _GateUnpickler(pickle.Unpickler):
    def __init__(self, file, peer: Optional[Peer] = None):
        super().__init__(file)
        self.peer = peer

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch.multiprocessing.reductions", "rebuild_storage_fd"):
            if self.peer is None:
                raise ForbiddenGlobal("a shared-memory CPU tensor where none is expected")
            return _guarded_rebuild_storage_fd(self.peer)
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module == "torch":                 # dtypes pickle as torch.<name> (torch.float8_e4m3fn, ...)
            obj = getattr(torch, name, None)
            if isinstance(obj, torch.dtype):
                return obj
        if module == "torch" and name.endswith("Storage") and isinstance(getattr(torch, name, None), type):
            return super().find_class(module, name)   # legacy typed storage classes (FloatStorage, ...)
        raise ForbiddenGlobal(f"worker message names {module}.{name}, which the gate does not unpickle")


def safe_loads(data: bytes, peer: Optional[Peer] = None) -> Any:
    """Unpickle one worker message with the allow-list.  ``peer``: the worker's resource-sharer
    address (see ``Peer``); without it no shared-memory CPU tensor is accepted.

    Raises:
        ForbiddenGlobal: the message names a global outside the allow-list, or a shared-memory
            handle that is not this worker's.
        pickle.UnpicklingError, EOFError, ...: a malformed message.
    """
    if peer is not None:
        peer.deadline = time.monotonic() + _FETCH_DEADLINE_S
    try:
        return _GateUnpickler(io.BytesIO(data), peer).load()
    finally:
        if peer is not None:
            peer.learning = False


# a worker message is a pickle of containers, scalars and buffer handles (the buffers themselves
# travel as shared memory), a few KB; the frame limits only have to stop a forged frame
MAX_FRAME_BYTES = 1 << 30
FRAME_DEADLINE_S = 10.0


def _read_exact(fd: int, n: int, deadline: float) -> bytes:
    """``n`` bytes from the pipe ``fd``, waiting at most until ``deadline`` (time.monotonic()).

    Raises:
        ForbiddenGlobal: the bytes did not all arrive in time.
        EOFError: the worker closed the pipe.
    """
    chunks, got = [], 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ForbiddenGlobal(f"a message frame that stopped arriving: {got} of {n} bytes by its deadline")
        readable, _, _ = select.select([fd], [], [], left)
        if not readable:
            continue
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the worker closed the pipe inside a message")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_frame(conn, deadline_s: float = FRAME_DEADLINE_S, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """One message's bytes in ``multiprocessing.Connection``'s framing (a 4-byte big-endian length,
    or -1 and an 8-byte length), read from the descriptor with a deadline: ``conn.recv_bytes()``
    blocks until the length its header claims has arrived, so a worker that writes a forged header
    and stops would hang the parent past every timeout (red-team case ``stalled_frame``).  Call it
    when ``conn.poll()`` says bytes are waiting.

    Raises:
        ForbiddenGlobal: a length over ``max_bytes``, or a frame not whole within ``deadline_s``.
        EOFError: the worker closed the pipe.
    """
    fd, deadline = conn.fileno(), time.monotonic() + deadline_s
    (size,) = struct.unpack("!i", _read_exact(fd, 4, deadline))
    if size == -1:
        (size,) = struct.unpack("!Q", _read_exact(fd, 8, deadline))
    if not 0 <= size <= max_bytes:
        raise ForbiddenGlobal(f"a message frame of {size} bytes (the gate reads at most {max_bytes})")
    return _read_exact(fd, size, deadline)


def safe_recv(conn, peer: Optional[Peer] = None) -> Any:
    """``conn.recv()`` without running code named by the sender: one frame read with a deadline
    (``recv_frame``), then ``safe_loads``."""
    return safe_loads(recv_frame(conn), peer)
