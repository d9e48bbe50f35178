"""The harness's stream pin (timing.StreamPin, worker.Harness._call): every call of the solution
starts on the harness's stream and must return on it (STREAM_SWITCHED).  CPU tests drive the pin
through stand-ins for torch's C stream functions; the GPU test uses the real ones."""

from types import SimpleNamespace

import pytest
import torch

from kernelwright.gate import guards, timing
from kernelwright.gate.worker import Harness, SolutionError


class _FakeDevice:
    """torch._C._cuda_setStream / _cuda_getCurrentStream over one device's current stream."""

    def __init__(self, current):
        self.current = current
        self.selects = 0

    def set(self, stream_id, device_index, device_type):
        self.selects += 1
        self.current = (stream_id, device_index, device_type)

    def get(self, device_index):
        return self.current


def _stream(sid):
    return SimpleNamespace(stream_id=sid, device_index=0, device_type=1)


@pytest.fixture
def device(monkeypatch):
    dev = _FakeDevice((7, 0, 1))
    monkeypatch.setattr(timing, "_set_stream_raw", dev.set)
    monkeypatch.setattr(timing, "_get_stream_raw", dev.get)
    return dev


def test_the_pin_selects_its_stream_and_sees_another_one(device):
    pin = timing.StreamPin(_stream(3))
    assert not pin.holds()
    pin.select()
    assert device.current == (3, 0, 1) and pin.holds()
    device.current = (9, 0, 1)             # the solution switched
    assert not pin.holds()
    other = _stream(9)
    assert pin.holds(other)                # the graph phase passes the stream it expects
    pin.select(other)
    assert device.current == (9, 0, 1)


def test_the_pin_is_a_no_op_without_a_stream():
    pin = timing.StreamPin(None)
    pin.select()
    assert pin.holds()


def _harness(fn, pin):
    h = object.__new__(Harness)
    h.fn, h.dps, h.stream_pin = fn, True, pin
    return h


def test_a_call_starts_on_the_harness_stream_even_when_another_was_left_current(device):
    seen = []
    h = _harness(lambda *a: seen.append(device.current), timing.StreamPin(_stream(3)))
    device.current = (42, 0, 1)            # e.g. a failed graph capture left torch's capture stream
    h._call([], [])
    assert seen == [(3, 0, 1)] and device.current == (3, 0, 1)


def test_a_call_that_leaves_another_stream_current_is_rejected_and_the_pin_restored(device):
    def switches(*_a):
        device.current = (11, 0, 1)        # torch.cuda.set_stream(private), never restored

    h = _harness(switches, timing.StreamPin(_stream(3)))
    with pytest.raises(SolutionError) as err:
        h._call([], [])
    assert err.value.reason == guards.STREAM_SWITCHED
    assert device.current == (3, 0, 1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_pin_sees_set_stream_and_not_a_stream_context():
    home = torch.cuda.current_stream()
    pin = timing.StreamPin(home)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert not pin.holds() and pin.holds(side)
    assert pin.holds()
    torch.cuda.set_stream(side)
    try:
        assert not pin.holds()
    finally:
        pin.select()
    assert pin.holds() and torch.cuda.current_stream() == home
