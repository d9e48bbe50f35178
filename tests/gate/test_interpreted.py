"""The CPU gate's hold on Triton's interpreter (gate/interpreted.py): the jit-body check and the
write ablation, on small kernels run through the interpreter."""

import math
import os

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1" or torch.cuda.is_available(),
                                reason="the interpreter's hooks: CPU with TRITON_INTERPRET=1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernelwright.gate.interpreted import JitBodyCheck, WriteAblation, storage_ranges  # noqa: E402

SCALE = tl.constexpr(2.0)


def _plain_helper(x):
    return x


@triton.jit
def _twice(x):
    return x * SCALE


@triton.jit
def _honest(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    s = tl.sum(x, axis=0) + math.pi * 0
    tl.store(y_ptr + offs, _twice(x) + s * 0, mask=offs < n)


@triton.jit
def _calls_helper(x_ptr, BLOCK: tl.constexpr):
    _plain_helper(x_ptr)


@triton.jit
def _uses_numpy(x_ptr, BLOCK: tl.constexpr):
    np.zeros(BLOCK)


@triton.jit
def _reads_handle(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), x.handle)


@triton.jit
def _calls_reached_bad(x_ptr, BLOCK: tl.constexpr):
    _calls_helper(x_ptr, BLOCK)


@triton.jit
def _calls_argument(x_ptr, FN: tl.constexpr, BLOCK: tl.constexpr):
    FN(x_ptr)


@triton.jit
def _atomics(out_ptr, counter_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(counter_ptr + offs, 1)
    tl.atomic_add(out_ptr + offs, 1)
    tl.store(out_ptr + offs, 5)


def test_honest_kernel_passes_the_jit_body_check():
    x = torch.randn(8)
    assert JitBodyCheck().check(_honest, (x, torch.empty(8), 8), {"BLOCK": 8}) is None


@pytest.mark.parametrize("kernel, needle", [
    (_calls_helper, "uses _plain_helper"),
    (_uses_numpy, "np"),
    (_reads_handle, ".handle"),
    (_calls_reached_bad, "_calls_helper uses _plain_helper"),
])
def test_a_body_a_gpu_could_not_run_is_named(kernel, needle):
    why = JitBodyCheck().check(kernel, (torch.zeros(8),), {"BLOCK": 8})
    assert why is not None and needle in why


def test_a_called_argument_must_be_a_jit_function():
    check = JitBodyCheck()
    assert check.check(_calls_argument, (torch.zeros(8), _twice), {"BLOCK": 8}) is None
    why = check.check(_calls_argument, (torch.zeros(8), _plain_helper), {"BLOCK": 8})
    assert why is not None and "an argument is a function" in why


def test_the_write_ablation_drops_stores_and_atomics_into_the_outputs_only_while_set():
    ablation = WriteAblation()
    out, counter = torch.zeros(8, dtype=torch.int32), torch.zeros(8, dtype=torch.int32)
    try:
        ablation.set(True, storage_ranges([out]))
        _atomics[(1,)](out, counter, BLOCK=8)
        assert out.tolist() == [0] * 8 and counter.tolist() == [1] * 8   # a work counter still advances
        ablation.set(True, None)                                          # every address
        _atomics[(1,)](out, counter, BLOCK=8)
        assert out.tolist() == [0] * 8 and counter.tolist() == [1] * 8
    finally:
        ablation.set(False, None)
    _atomics[(1,)](out, counter, BLOCK=8)
    assert out.tolist() == [5] * 8 and counter.tolist() == [2] * 8


HELPER = _twice      # rebound by the test below


@triton.jit
def _calls_global_helper(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, HELPER(tl.load(x_ptr + offs)))


def test_a_global_rebound_after_a_passing_check_is_read_again():
    global HELPER
    check = JitBodyCheck()
    x = torch.zeros(8)
    assert check.check(_calls_global_helper, (x,), {"BLOCK": 8}) is None
    HELPER = _plain_helper
    try:
        why = check.check(_calls_global_helper, (x,), {"BLOCK": 8})
        assert why is not None and "HELPER" in why
    finally:
        HELPER = _twice


def test_the_interpreters_machinery_replaced_after_the_snapshot_is_named():
    from triton.runtime.interpreter import InterpretedFunction

    check = JitBodyCheck()
    original = InterpretedFunction.__dict__["rewrite"]
    InterpretedFunction.rewrite = lambda self: original(self)
    try:
        why = check.check(_honest, (torch.zeros(8), torch.empty(8), 8), {"BLOCK": 8})
        assert why is not None and "InterpretedFunction.rewrite" in why
    finally:
        InterpretedFunction.rewrite = original
