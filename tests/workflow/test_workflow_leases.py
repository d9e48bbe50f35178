"""Device leases: sharing, exclusivity, quiet official timing, visible waiting."""

from __future__ import annotations

import pytest

from kernelwright.workflow.leases import LocalLeasePool


def test_turns_share_checks_do_not():
    pool = LocalLeasePool(["cuda:0"], quiet="device", turn_share=2)
    t1 = pool.try_acquire("turn", "coder-1", "coder")
    t2 = pool.try_acquire("turn", "coder-2", "coder")
    assert t1 and t2 and pool.try_acquire("turn", "coder-3", "coder") is None
    c1 = pool.try_acquire("check", "a1", "coder")
    assert c1 is not None                      # a check runs next to turns
    assert pool.try_acquire("check", "a2", "coder") is None
    waiting = [s for s in pool.snapshot() if s["device"] is None]
    assert {w["holder"] for w in waiting} == {"coder-3", "a2"}
    pool.release(c1)
    assert pool.try_acquire("check", "a2", "coder") is not None


def test_official_needs_a_quiet_device_and_blocks_newcomers():
    pool = LocalLeasePool(["cuda:0", "cuda:1"], quiet="device")
    c0 = pool.try_acquire("check", "a1", "coder")
    c1 = pool.try_acquire("check", "a2", "coder")
    assert c0.device != c1.device
    assert pool.try_acquire("official", "final-c1", "gate") is None      # both devices busy
    pool.release(c0)
    # the freed device is reserved for the waiting official: a new check must not take it
    assert pool.try_acquire("check", "a3", "coder") is None
    off = pool.try_acquire("official", "final-c1", "gate")
    assert off is not None and off.device == c0.device
    assert pool.try_acquire("official", "final-c2", "gate") is None      # one official at a time
    assert pool.try_acquire("turn", "coder-1", "coder").device == c1.device


def test_host_quiet_waits_for_every_device():
    pool = LocalLeasePool(["cpu:0", "cpu:1"], quiet="host")
    c = pool.try_acquire("check", "a1", "coder")
    assert pool.try_acquire("official", "final-c1", "gate") is None
    assert pool.try_acquire("check", "a2", "coder") is None               # host reserved
    pool.release(c)
    off = pool.try_acquire("official", "final-c1", "gate")
    assert off is not None
    assert pool.try_acquire("turn", "coder-1", "coder") is None           # nothing next to official timing
    assert off.index in (0, 1) and off.device_type == "cpu"


def test_same_holder_gets_same_lease_and_bad_kind():
    pool = LocalLeasePool(["cuda:0"])
    a = pool.try_acquire("turn", "coder-1", "coder")
    assert pool.try_acquire("turn", "coder-1", "coder") is a
    with pytest.raises(ValueError):
        pool.try_acquire("bogus", "x", "y")
    with pytest.raises(ValueError):
        LocalLeasePool([])
