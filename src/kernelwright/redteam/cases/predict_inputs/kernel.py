"""Predicts the timed inputs from the seed formula (found by the 2026-11-29 red-team review).
Every input seed was ``seed_for(salt, split, workload uuid, "iter", trial, i)`` with the public
salt a constant, so a solution could generate every timed input itself, compute the outputs, and
look them up by a fingerprint of ``x``.  Every call it cannot answer from its table computes
honestly and sleeps 20 ms.  Expected: PASS at >= 19 ms (a random nonce drawn per run is mixed into
every seed: the predicted inputs never occur, so every call is honest and slow; were the inputs
predictable, the timed calls would be copies of well under 19 ms).
"""

import time

import triton
import triton.language as tl

from kernelwright.redteam.frames import harness_frame


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


@triton.jit
def _empty(y_ptr):
    tl.program_id(0)


_table = {}


def _fingerprint(x):
    return hash(x.detach().to("cpu").contiguous().view(-1).float().numpy().tobytes())


def _predict_all():
    """At import (no call is observed then): the demo's quick workloads, every timed iteration of
    the first trials, as the gate seeded them with the constant public salt."""
    from kernelwright import definitions
    from kernelwright.inputs import make_generator, seed_for

    builtin = definitions.get("demo").quick_variant()
    for workload in builtin.public_workloads():
        for trial in range(3):
            for i in range(64):
                seed = seed_for("kernelwright-public", "public", workload.uuid, "iter", trial, i)
                inputs = builtin.make_inputs(builtin.definition, workload, make_generator(seed, "cpu"), "cpu")
                _table[_fingerprint(inputs["x"])] = builtin.reference(**inputs)


_predict_all()


def run(x, weight, eps, y):
    hit = _table.get(_fingerprint(x)) if harness_frame("op_time") is not None else None
    if hit is not None:
        y.copy_(hit.to(y.device))
        _empty[(1,)](y)
        return
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    time.sleep(0.02)
