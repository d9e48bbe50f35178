"""What one worker message may make the parent do (gate/wire.py): the pickle scan before it is
rebuilt (hashing, nesting, opcodes), the walk after (objects, depth), ``bytearray`` on bytes only,
writes with a deadline, and the host-op tally's bounds (gate/session.py).  Red-team cases
hash_bomb_key, deep_tuple_key, bytearray_bomb, step_flood, host_op_hoard."""
import collections
import multiprocessing
import os
import pickle
import struct
import threading
import time

import pytest
import torch

from kernelwright.gate import session, wire


def _tuple_dag_key(depth: int) -> bytes:
    """{t(depth): 1}, t0 = 0, t(k+1) = (t(k), t(k)) through the memo: 2**depth leaves to hash."""
    ops = [b"\x80\x02}", b"K\x00"]
    for k in range(depth):
        ops += [b"r" + struct.pack("<I", k), b"j" + struct.pack("<I", k), b"\x86"]
    return b"".join(ops + [b"K\x01s."])


def test_a_key_that_would_take_for_ever_to_hash_is_refused_at_once():
    started = time.monotonic()
    for depth in (20, 40, 64):
        with pytest.raises(wire.ForbiddenGlobal, match="hashes more than|nests tuples"):
            wire.safe_loads(_tuple_dag_key(depth))
    assert time.monotonic() - started < 2
    assert len(next(iter(wire.safe_loads(_tuple_dag_key(10))))) == 2      # small ones still rebuild


def test_a_key_nested_past_the_c_stack_is_refused_before_it_is_built():
    """Three million TUPLE1 opcodes: hashing the key overflowed the parent's stack (SIGSEGV)."""
    data = b"\x80\x02}K\x00" + b"\x85" * 3_000_000 + b"K\x01s."
    started = time.monotonic()
    with pytest.raises(wire.ForbiddenGlobal, match="nests tuples 65 deep"):
        wire.safe_loads(data)
    assert time.monotonic() - started < 1
    assert wire.safe_loads(b"\x80\x02}K\x00" + b"\x85" * 50 + b"K\x01s.")       # 50 deep is fine


def test_set_elements_built_through_calls_count_too():
    """frozenset(list) through the allow-listed global hashes the list's elements: a list holding
    a tuple DAG, appended after the list was stored, is counted as it is."""
    dag = _tuple_dag_key(30)[3:-4]          # BININT1 0 and the levels, leaving t30 on the stack
    data = b"\x80\x02cbuiltins\nfrozenset\n]q\x00" + dag + b"a\x85R."
    with pytest.raises(wire.ForbiddenGlobal, match="hashes more than"):
        wire.safe_loads(data)


def test_a_message_whose_repr_has_no_end_is_refused_after_it_is_rebuilt():
    """Lists filled top-down through the memo: L(k) = [L(k-1), L(k-1)], 40 levels, a few hundred
    bytes; the parent quotes refused messages (str(reply)), which would be 2**40 items."""
    ops = [b"\x80\x02"]
    for k in range(41):
        ops += [b"]", b"r" + struct.pack("<I", k), b"0"]
    for k in range(40, 0, -1):
        ops += [b"j" + struct.pack("<I", k), b"(", b"j" + struct.pack("<I", k - 1), b"j" + struct.pack("<I", k - 1), b"e0"]
    ops += [b"j" + struct.pack("<I", 40), b"."]
    with pytest.raises(wire.ForbiddenGlobal, match="more than .* objects"):
        wire.safe_loads(b"".join(ops))
    cycle = b"\x80\x02]q\x00h\x00a."             # a list that holds itself
    with pytest.raises(wire.ForbiddenGlobal, match="objects|nested"):
        wire.safe_loads(cycle)
    deep = b"\x80\x02" + b"]" * 100 + b"a" * 99 + b"."
    with pytest.raises(wire.ForbiddenGlobal, match="nested more than"):
        wire.safe_loads(deep)


def test_too_many_opcodes_are_refused():
    with pytest.raises(wire.ForbiddenGlobal, match="more than 1000000 pickle opcodes"):
        wire.safe_loads(b"\x80\x02" + b"N" * (wire.MAX_MESSAGE_OPCODES + 5) + b".")


def test_bytearray_rebuilds_bytes_never_a_size():
    with pytest.raises(wire.ForbiddenGlobal, match="bytearray called on int"):
        wire.safe_loads(b"\x80\x02cbuiltins\nbytearray\nJ\x00\x00\x00\x40\x85R.")    # bytearray(1 GiB)
    assert wire.safe_loads(pickle.dumps({"b": bytearray(b"abc")}, protocol=4)) == {"b": bytearray(b"abc")}
    assert wire.safe_loads(pickle.dumps(bytearray(b"\xff"), protocol=3)) == bytearray(b"\xff")


def test_real_messages_still_rebuild():
    """Messages shaped like the worker's (ForkingPickler, protocol 4 as the worker's Connection
    sends, and 5) pass the scan and the walk."""
    from multiprocessing.reduction import ForkingPickler

    msg = {"ok": True, "samples": {"latency_ms": [0.5] * 5000, "kernels": {"k": [3, 1.5]}},
           "host_ops": {}, "keys": {(1, 2): "a", ("x", (3, 4)): "b"}, "od": collections.OrderedDict(a=1),
           "s": {1, 2}, "f": frozenset([(1, 2)]), "shape": torch.Size([2, 3]), "dev": torch.device("cpu"),
           "c": complex(1, 2), "sl": slice(1, 2)}
    for protocol in (4, 5):
        assert wire.safe_loads(bytes(ForkingPickler.dumps(msg, protocol))) == msg


def test_a_worker_that_reads_nothing_cannot_hold_the_parents_write():
    """The parent's answers to steps its worker never reads (case step_flood): once the socket's
    buffers are full, send_frame gives up at its deadline instead of blocking for ever."""
    parent, child = multiprocessing.Pipe()
    wire.send_frame(parent, {"op": "ping", "nonce": 7})
    assert child.recv() == {"op": "ping", "nonce": 7}                 # the same framing and pickle
    started = time.monotonic()
    with pytest.raises(wire.SendStalled, match="not reading"):
        for _ in range(1_000_000):
            wire.send_frame(parent, {"step": "spec", "pad": "x" * 1000}, deadline_s=0.5)
    assert time.monotonic() - started < 10
    assert os.get_blocking(parent.fileno())                           # left as it was


def test_host_op_names_and_their_number_are_bounded():
    tally: dict = {}
    assert session._tally_host_op(tally, {"host_op": ("torch::mm", 1.0, 4)})
    assert not session._tally_host_op(tally, {"host_op": ("torch::" + "a" * 2000, 1.0, 4)})
    for k in range(session.MAX_HOST_OP_NAMES - 1):
        assert session._tally_host_op(tally, {"host_op": (f"torch::op{k}", 1.0, 1)})
    assert not session._tally_host_op(tally, {"host_op": ("torch::one_more", 1.0, 1)})
    assert session._tally_host_op(tally, {"host_op": ("torch::mm", 1.0, 4)})     # a known name still counts
    assert tally["torch::mm"] == [2, 2.0, 8]


class _Alive:
    exitcode = None

    def is_alive(self):
        return True

    def join(self, timeout=None):
        return None


def _bare_session(conn):
    """A WorkerSession reduced to what ``_wait`` reads: its end of the pipe, no worker to kill."""
    s = session.WorkerSession.__new__(session.WorkerSession)
    s.timeouts, s.conn, s._peer, s.proc = session.Timeouts(), conn, wire.Peer(), _Alive()
    s.kill = lambda: None
    s.log_tail = lambda limit=8000: ""
    return s


def test_one_requests_messages_are_bounded_in_bytes(monkeypatch):
    """Well-formed host-op records, each under the frame limit, could add up without end until
    the reply (case host_op_hoard): past wire.MAX_REQUEST_BYTES the request is GATE_TAMPERED."""
    monkeypatch.setattr(wire, "MAX_REQUEST_BYTES", 20_000)
    parent, child = multiprocessing.Pipe()

    def records():
        try:
            for _ in range(1000):
                child.send({"host_op": ("torch::mm", 1.0, 1)})
        except OSError:
            pass

    threading.Thread(target=records, daemon=True).start()
    reply = _bare_session(parent)._wait(5.0, None, {})
    assert reply["reason"] == "GATE_TAMPERED" and "more than 20000 bytes" in reply["error"]


def test_a_step_answer_the_worker_never_reads_ends_the_request():
    """Inside a timing op every step gets an answer; a worker that floods steps and reads none
    filled the socket and blocked the parent's answer for ever (case step_flood)."""
    parent, child = multiprocessing.Pipe()
    frame = pickle.dumps({"step": "spec", "phase": "flood", "i": 0}, protocol=4)

    def flood():
        try:
            for _ in range(20_000):
                child.send_bytes(frame)
        except OSError:
            pass

    threading.Thread(target=flood, daemon=True).start()
    started = time.monotonic()
    reply = _bare_session(parent)._wait(60.0, lambda m: {"step": m.get("step"), "pad": "x" * 100}, {})
    assert reply["reason"] == "GATE_TAMPERED" and "unread" in reply["error"]
    assert time.monotonic() - started < wire.FRAME_DEADLINE_S + 10


def test_calls_the_scan_cannot_name_or_that_allocate_in_the_parent_are_refused():
    """helper-33's review: a slice chain that crashed the parent when freed, torch.Tensor called on
    a nested list, DupFd(0) opening a descriptor in the parent, protocol-0 INST, and a callee the
    scan cannot name (STACK_GLOBAL on BINSTRING strings)."""
    P = pickle
    n = 1000
    chain = (P.PROTO + b"\x04" + P.GLOBAL + b"builtins\nslice\n" + P.BINPUT + b"\0"
             + (P.BINGET + b"\0") * (n - 1) + P.NONE + (P.TUPLE1 + P.REDUCE) * n + P.STOP)
    with pytest.raises(wire.ForbiddenGlobal, match="slice called on slice"):
        wire.safe_loads(chain)
    assert wire.safe_loads(pickle.dumps({"s": slice(1, 5, None)})) == {"s": slice(1, 5, None)}
    tensor = P.PROTO + b"\x04" + P.GLOBAL + b"torch\nTensor\n" + P.EMPTY_LIST + P.TUPLE1 + P.REDUCE + P.STOP
    dupfd = (P.PROTO + b"\x04" + P.GLOBAL + b"multiprocessing.resource_sharer\nDupFd\n" + P.BININT1 + b"\0"
             + P.TUPLE1 + P.REDUCE + P.STOP)
    inst = P.MARK + P.INST + b"builtins\nset\n" + P.STOP
    hidden = (P.PROTO + b"\x04" + P.SHORT_BINSTRING + b"\x08builtins" + P.SHORT_BINSTRING + b"\x03set"
              + P.STACK_GLOBAL + P.EMPTY_TUPLE + P.REDUCE + P.STOP)
    for data, why in ((tensor, "calls torch.Tensor directly"), (dupfd, "DupFd with arguments"),
                      (inst, "instantiates a class with INST"), (hidden, "does not name")):
        with pytest.raises(wire.ForbiddenGlobal, match=why):
            wire.safe_loads(data)


def test_a_refused_message_is_quoted_within_bounds():
    from kernelwright.gate.session import _quote

    big = "x" * (10 << 20)
    text = _quote({"host_op": [big] * 1000})
    assert len(text) <= 200 and text.startswith("{'host_op'")
