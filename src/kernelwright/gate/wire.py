"""What the parent accepts from a worker's pipe: pickles that can only rebuild data and shared
tensors, never call arbitrary code in the parent.

``multiprocessing.Connection.recv()`` unpickles whatever arrives, and a pickle can name any
importable callable (``builtins.eval``, ``os.system``) through its ``__reduce__``.  The worker runs
untrusted solution code in its own process, and that code can write to the pipe (it finds the
connection through ``gc``), so a plain ``recv()`` in the parent would run the solution's code in
the process that holds the references and decides the verdicts (red-team case
``pickle_parent``).  The parent reads the raw bytes of each frame (``recv_frame``) and unpickles them
with an allow-list (``safe_loads``):
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
from typing import Any, Dict, FrozenSet, Optional, Tuple

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
       ("builtins", "complex")]
)


def _bytearray(*args: Any) -> bytearray:
    """``bytearray`` as pickles of protocols 2-4 call it: on bytes (or a latin-1 str and its
    encoding).  Called with a size it would allocate and zero that many bytes in the parent, from
    a message of a few bytes (red-team case ``bytearray_bomb``).

    Raises:
        ForbiddenGlobal: any other argument.
    """
    if not args:
        return bytearray()
    if len(args) == 1 and isinstance(args[0], (bytes, bytearray)):
        return bytearray(args[0])
    if len(args) == 2 and isinstance(args[0], str) and isinstance(args[1], str):
        return bytearray(args[0], args[1])
    raise ForbiddenGlobal(f"bytearray called on {', '.join(type(a).__name__ for a in args)}, not on bytes")


def _slice(*args: Any) -> slice:
    """``slice`` on ints and None only: a slice of slices nested 330 000 deep (a 1.3 MB message)
    crashed the parent with SIGSEGV when it was freed (slice deallocation recurses in C), and a
    slice holding shared lists hid them from ``tree_problem`` (helper-33's review, 2026-12-08).

    Raises:
        ForbiddenGlobal: any other argument.
    """
    if 1 <= len(args) <= 3 and all(a is None or type(a) is int for a in args):
        return slice(*args)
    raise ForbiddenGlobal(f"slice called on {', '.join(type(a).__name__ for a in args)}, not on ints")


class _GateUnpickler(pickle.Unpickler):
    def __init__(self, file, peer: Optional[Peer] = None):
        super().__init__(file)
        self.peer = peer

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch.multiprocessing.reductions", "rebuild_storage_fd"):
            if self.peer is None:
                raise ForbiddenGlobal("a shared-memory CPU tensor where none is expected")
            return _guarded_rebuild_storage_fd(self.peer)
        if (module, name) == ("builtins", "bytearray"):
            return _bytearray
        if (module, name) == ("builtins", "slice"):
            return _slice
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
    problem = pickle_problem(data)
    if problem is not None:
        if peer is not None:
            peer.learning = False
        raise ForbiddenGlobal(problem)
    if peer is not None:
        peer.deadline = time.monotonic() + _FETCH_DEADLINE_S
    try:
        message = _GateUnpickler(io.BytesIO(data), peer).load()
    finally:
        if peer is not None:
            peer.learning = False
    problem = tree_problem(message)
    if problem is not None:
        raise ForbiddenGlobal(problem)
    return message


# what one message may make the parent do while it rebuilds and reads it.  A worker message is a
# few hundred pickle opcodes on the CPU (the largest of an honest CPU run, 2026-12-08: 948 bytes,
# 206 opcodes); the bounds only have to stop forged ones, far from any real message.
MAX_MESSAGE_OPCODES = 1_000_000
# elements hashed while the message is rebuilt (dict keys, set elements), each tuple counted with
# everything nested in it: a tuple's hash is not cached, so a key of tuples shared through the memo
# (t(k+1) = (t(k), t(k))) costs 2**depth in C, holding the GIL (case ``hash_bomb_key``)
MAX_HASH_WORK = 1_000_000
# tuples nested in a message (and in what it hashes): tuple hashing recurses in C with no depth check,
# and a key nested three million deep (one byte a level) overflowed the parent's stack (case
# ``deep_tuple_key``); refused as soon as the scan builds one that deep
MAX_HASH_NESTING = 64
# the rebuilt message walked as a tree (a shared object counted at each reference): what the
# parent's reprs, comparisons and loops over it may cost, and how deep they recurse
MAX_MESSAGE_NODES = 1_000_000
MAX_MESSAGE_DEPTH = 64


class _Rec:
    """What the scan knows of one stack or memo object: its kind, what hashing it would cost (``h``,
    tuples counted with their contents) and how deep that recurses (``d``), and for a container the
    same summed over the elements a set or a dict built from it would hash (``eh``, ``ed``)."""

    __slots__ = ("kind", "h", "d", "eh", "ed", "value", "first")

    def __init__(self, kind: str, h: int = 1, d: int = 1, eh: int = 0, ed: int = 0, value: Any = None,
                 first: Any = None):
        self.kind, self.h, self.d, self.eh, self.ed, self.value, self.first = kind, h, d, eh, ed, value, first


_MARK = object()
_SIZED_TUPLES = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3, "EMPTY_TUPLE": 0}
_HASHING_CALLS = (("builtins", "set"), ("builtins", "frozenset"), ("collections", "OrderedDict"))


class _Refused(Exception):
    """Raised inside the scan: the message is refused for the reason given."""


def _callee_problem(func: Any, args: Any, opcode: str) -> Optional[str]:
    """Why the scan refuses a REDUCE / NEWOBJ(_EX) of ``func`` on ``args``, or None.  Honest
    messages call only named globals (GLOBAL, or STACK_GLOBAL on two short strings); tensor and
    storage classes only travel as arguments of the rebuild functions, and a ``DupFd`` only as
    ``copyreg.__newobj__`` builds it (NEWOBJ, no arguments).  Called directly, ``torch.Tensor``
    on a 500-byte nested list allocated 128 MB in 4 s, and ``DupFd(0)`` opened a descriptor in
    the parent that stays open (helper-33's review, 2026-12-08)."""
    callee = getattr(func, "value", None) if isinstance(func, _Rec) and func.kind == "global" else None
    if not isinstance(callee, tuple) or not all(isinstance(part, str) for part in callee):
        return f"a message whose pickle calls something it does not name ({opcode})"
    module, attr = callee
    if (module in ("torch", "torch.storage") and (attr == "Tensor" or attr.endswith("Storage"))) \
            or callee == ("torch.nn.parameter", "Parameter"):
        return f"a message whose pickle calls {module}.{attr} directly"
    if callee == ("multiprocessing.resource_sharer", "DupFd") and not (
            opcode == "NEWOBJ" and isinstance(args, _Rec) and args.kind == "tuple" and args.h == 1):
        return "a message whose pickle calls DupFd with arguments"
    return None


class _PickleScan:
    """One message's opcodes replayed on records (``_Rec``) instead of objects: ``pickle_problem``."""

    def __init__(self) -> None:
        self.stack: list = []
        self.memo: Dict[int, _Rec] = {}
        self.work = 0

    def run(self, data: bytes) -> None:
        import pickletools

        for count, (op, arg, _pos) in enumerate(pickletools.genops(data), 1):
            if count > MAX_MESSAGE_OPCODES:
                raise _Refused(f"a message of more than {MAX_MESSAGE_OPCODES} pickle opcodes")
            self.step(op, arg)

    def step(self, op, arg: Any) -> None:
        name, stack = op.name, self.stack
        if name in ("PROTO", "FRAME", "STOP"):
            return
        if name == "MARK":
            stack.append(_MARK)
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            self.memo[int(arg)] = stack[-1]
        elif name == "MEMOIZE":
            self.memo[len(self.memo)] = stack[-1]
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(self.memo[int(arg)])
        elif name == "DUP":
            stack.append(stack[-1])
        elif name == "POP":
            stack.pop()
        elif name == "POP_MARK":
            self.pop_to_mark()
        elif name.startswith(("TUPLE", "EMPTY_TUPLE")):
            self.tuple(name)
        elif name in ("EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET"):
            stack.append(_Rec(name[6:].lower()))
        elif name in ("LIST", "DICT", "FROZENSET"):
            self.container(name)
        elif name in ("APPEND", "SETITEM", "APPENDS", "SETITEMS", "ADDITEMS"):
            self.extend(name)
        elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
            stack.append(_Rec("str", value=arg if len(arg) < 256 else None))
        elif name == "GLOBAL":
            module, _, attr = str(arg).partition(" ")
            stack.append(_Rec("global", value=(module, attr)))
        elif name == "STACK_GLOBAL":
            attr, module = stack.pop(), stack.pop()
            stack.append(_Rec("global", value=(getattr(module, "value", None), getattr(attr, "value", None))))
        elif name in ("REDUCE", "NEWOBJ", "NEWOBJ_EX"):
            self.call(3 if name == "NEWOBJ_EX" else 2, name)
        elif name in ("INST", "OBJ"):      # protocol 0/1 instantiation: no message of the worker's uses it
            raise _Refused(f"a message whose pickle instantiates a class with {name}")
        else:
            self.generic(op)

    def hashed(self, rec: Any, elements: bool = False) -> None:
        """Count hashing ``rec`` (or, with ``elements``, what a set or dict built from it hashes)."""
        if not isinstance(rec, _Rec):
            return
        self.work += rec.eh if elements else rec.h
        depth = rec.ed if elements else rec.d
        if depth > MAX_HASH_NESTING:
            raise _Refused(f"a message whose pickle hashes tuples nested {depth} deep (the gate allows "
                           f"{MAX_HASH_NESTING})")
        if self.work > MAX_HASH_WORK:
            raise _Refused(f"a message whose pickle hashes more than {MAX_HASH_WORK} elements while it is rebuilt")

    @staticmethod
    def add_elements(container: Any, items) -> None:
        if isinstance(container, _Rec):
            for it in items:
                if isinstance(it, _Rec):
                    container.eh += it.h
                    container.ed = max(container.ed, it.d)

    def pop_to_mark(self) -> list:
        stack = self.stack
        for k in range(len(stack) - 1, -1, -1):
            if stack[k] is _MARK:
                items = stack[k + 1:]
                del stack[k:]
                return items
        raise ValueError("no mark")

    def pop(self, n: int) -> list:
        items = self.stack[len(self.stack) - n:] if n else []
        del self.stack[len(self.stack) - n:]
        return items

    def tuple(self, name: str) -> None:
        n = _SIZED_TUPLES.get(name)
        items = self.pop_to_mark() if n is None else self.pop(n)
        recs = [it if isinstance(it, _Rec) else _Rec("other") for it in items]
        rec = _Rec("tuple", h=1 + sum(r.h for r in recs), d=1 + max((r.d for r in recs), default=0),
                   first=recs[0] if recs else None)
        if rec.d > MAX_HASH_NESTING:     # refused as it is built: the scan of a deep one stops here
            raise _Refused(f"a message whose pickle nests tuples {rec.d} deep (the gate allows {MAX_HASH_NESTING})")
        self.add_elements(rec, recs)
        self.stack.append(rec)

    def container(self, name: str) -> None:
        items = self.pop_to_mark()
        keys = items[0::2] if name == "DICT" else items
        rec = _Rec(name.lower())
        if name != "LIST":
            for it in keys:
                self.hashed(it)
        self.add_elements(rec, keys)
        self.stack.append(rec)

    def extend(self, name: str) -> None:
        """APPEND / SETITEM (one element or pair) and APPENDS / SETITEMS / ADDITEMS (to the mark)."""
        if name in ("APPEND", "SETITEM"):
            items = self.pop(1 if name == "APPEND" else 2)
        else:
            items = self.pop_to_mark()
        keys = items[0::2] if name.startswith("SETITEM") else items
        if name != "APPEND" and name != "APPENDS":
            for it in keys:
                self.hashed(it)
        self.add_elements(self.stack[-1], keys)

    def call(self, n: int, name: str = "REDUCE") -> None:
        """REDUCE / NEWOBJ(_EX): a call of set, frozenset or OrderedDict hashes its argument's
        elements; the callee must be a global the scan can name (``_callee_problem``)."""
        func, args = self.stack[len(self.stack) - n], self.stack[len(self.stack) - n + 1]
        del self.stack[len(self.stack) - n:]
        problem = _callee_problem(func, args, name)
        if problem:
            raise _Refused(problem)
        first = getattr(args, "first", None)
        if getattr(func, "value", None) in _HASHING_CALLS:
            self.hashed(first, elements=True)
        rec = _Rec("other")
        if isinstance(first, _Rec):     # what iterating the result would hash again
            rec.eh, rec.ed = first.eh, first.ed
        self.stack.append(rec)

    def generic(self, op) -> None:
        """Any other opcode: its effect on the stack, from pickletools' table."""
        import pickletools

        before, after = op.stack_before, op.stack_after
        if pickletools.markobject in before:
            self.pop_to_mark()
            rest = before.index(pickletools.markobject)
        else:
            rest = len(before)
        if len(self.stack) < rest:
            raise ValueError("stack underflow")
        self.pop(rest)
        for kind in after:
            self.stack.append(_MARK if kind is pickletools.markobject else _Rec("other"))


def pickle_problem(data: bytes) -> Optional[str]:
    """Why the parent must not unpickle ``data``, or None: a scan of its opcodes (``pickletools``,
    nothing built) that bounds their number (``MAX_MESSAGE_OPCODES``) and what rebuilding it would
    spend hashing (``MAX_HASH_WORK``, ``MAX_HASH_NESTING``): the dict keys and set elements of
    the ``SETITEM(S)``, ``DICT``, ``ADDITEMS`` and ``FROZENSET`` opcodes and of calls of ``set``,
    ``frozenset`` and ``OrderedDict``.  Memo entries are the scan's own records, so an object
    fetched again (``GET``) or grown after it was stored (``APPENDS`` on a stored list) is counted
    as it is.  A pickle the scan cannot follow is refused too (the unpickler would refuse it)."""
    try:
        _PickleScan().run(data)
    except _Refused as refused:
        return str(refused)
    except Exception as exc:  # noqa: BLE001 - a pickle the scan cannot follow
        return f"a message whose pickle the gate cannot scan: {type(exc).__name__}: {exc}"[:300]
    return None


def tree_problem(message: Any) -> Optional[str]:
    """Why the parent must not read the rebuilt ``message``, or None: walked as a tree (a shared
    container counted again at each reference, a container holding itself without end) it may have
    at most ``MAX_MESSAGE_NODES`` objects, nested at most ``MAX_MESSAGE_DEPTH`` deep.  A message
    with one list referenced twice on each of 40 levels is a few hundred bytes, and its ``repr``
    (the parent quotes messages it refuses) would be 2**40 items."""
    todo = [(message, 1)]
    nodes = 0
    while todo:
        obj, depth = todo.pop()
        nodes += 1
        if nodes > MAX_MESSAGE_NODES:
            return f"a message of more than {MAX_MESSAGE_NODES} objects (shared ones counted at each reference)"
        if depth > MAX_MESSAGE_DEPTH:
            return f"a message nested more than {MAX_MESSAGE_DEPTH} deep"
        if isinstance(obj, (str, bytes, bytearray, int, float, complex, bool, type(None), torch.Tensor)):
            continue
        if isinstance(obj, dict):
            todo.extend((k, depth + 1) for k in dict.keys(obj))
            todo.extend((v, depth + 1) for v in dict.values(obj))
        elif isinstance(obj, (list, tuple, set, frozenset)):
            todo.extend((v, depth + 1) for v in (list.__iter__(obj) if isinstance(obj, list) else
                                                 tuple.__iter__(obj) if isinstance(obj, tuple) else iter(obj)))
    return None


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


# what all the messages of one request may total (``session.WorkerSession._wait``): each frame is
# read, rebuilt and partly kept (host-op names, exchange steps) until the reply, so a worker that
# sent frame after frame under the limit grew the parent until the OOM killer ended it (case
# ``host_op_hoard``)
MAX_REQUEST_BYTES = 1 << 30


class SendStalled(Exception):
    """A message to the worker that did not go out by its deadline: the worker is not reading."""


def send_frame(conn, obj: Any, deadline_s: float = FRAME_DEADLINE_S) -> None:
    """``conn.send(obj)`` (the same pickle and framing) written to the descriptor with a deadline.
    ``Connection.send`` blocks while the socket's buffers are full, with no limit: a worker that
    sends step after step and reads none of the answers filled them, and the parent blocked in its
    answer for ever, inside the loop that enforces every timeout (case ``step_flood``).

    Raises:
        SendStalled: the message was not all written within ``deadline_s``.
        OSError: the worker closed the pipe.
    """
    from multiprocessing.reduction import ForkingPickler

    body = bytes(ForkingPickler.dumps(obj))
    header = struct.pack("!i", len(body)) if len(body) <= 0x7FFFFFFF else struct.pack("!iQ", -1, len(body))
    data = memoryview(header + body)
    fd, deadline = conn.fileno(), time.monotonic() + deadline_s
    blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        while len(data):
            left = deadline - time.monotonic()
            if left <= 0:
                raise SendStalled(f"{len(data)} of {len(header) + len(body)} bytes of a message to the worker "
                                  f"still unsent after {deadline_s:g} s: the worker is not reading")
            _, writable, _ = select.select([], [fd], [], left)
            if not writable:
                continue
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                continue
    finally:
        os.set_blocking(fd, blocking)

