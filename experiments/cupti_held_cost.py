"""What does CUPTI activity tracing cost the device-time clock, and can every held call be traced?

Question (docs/gate.md section 3, item 15): the CUPTI window runs apart from the timed calls, so a
solution can recognise it.  Tracing every held timed call closes that only if tracing does not move
device time.  This probe times, with the gate's held-stream clock (``timing.StreamHold``, L2 not
flushed), four calls in three process states: untraced (fresh), traced (kernel, memcpy and memset
activity enabled around every call, flushed once at the end), and untraced again after
``cuptiFinalize``.  For the traced state it also reports, per call, the CUPTI extent (hold end to
the last record's end, on any stream) beside the events' elapsed time, and for an unjoined
private-stream kernel how far the extent exceeds the events.

    empty     two events and nothing between them
    trivial   one tiny kernel (x.add_(1))
    chain8    eight tiny kernels on the stream
    gemm      one 4096^3 bf16 matmul (~0.2 ms)
    unjoined  a trivial kernel on the stream and a 40 us spin on a private stream never joined

Usage (H200): python experiments/cupti_held_cost.py [--iters 40] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton
import triton.language as tl

from kernelwright.gate import timing as T

DEV = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)


@triton.jit
def _spin(y_ptr, ns: tl.constexpr):
    t0 = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
    t = t0
    while t - t0 < ns:
        t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
    tl.store(y_ptr, (t - t0).to(tl.float32))


def calls():
    x = torch.zeros(256, device=DEV)
    a = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
    c = torch.empty(4096, 4096, device=DEV, dtype=torch.bfloat16)
    side = torch.cuda.Stream(device=DEV)
    y = torch.zeros(1, device=DEV)

    def chain8():
        for _ in range(8):
            x.add_(1)

    def unjoined():
        here = torch.cuda.current_stream(DEV)
        side.wait_stream(here)
        with torch.cuda.stream(side):
            _spin[(1,)](y, ns=40_000)
        x.add_(1)

    return {"empty": lambda: None, "trivial": lambda: x.add_(1), "chain8": chain8,
            "gemm": lambda: torch.matmul(a, b, out=c), "unjoined": unjoined}


def held_times(hold, fn, iters, tracer=None):
    stream = torch.cuda.current_stream(DEV)
    out = []
    for i in range(iters + 3):
        torch.cuda.synchronize()
        t0 = tracer.timestamp() if tracer else 0
        start, end = T.new_event(), T.new_event()
        epoch = hold.begin(stream)
        T.record(start)
        fn()
        T.record(end)
        hold.release(epoch)
        torch.cuda.synchronize()
        t1 = tracer.timestamp() if tracer else 0
        if i >= 3 and hold.outcome(epoch) == T.HOLD_RELEASED:
            out.append((T.elapsed_ms(start, end) * 1e3, t0, t1))
    return out


def extents(samples, records, copies):
    """Per traced call: (events us, CUPTI extent us: hold end -> last end, kernels seen)."""
    rows = []
    for ev_us, t0, t1 in samples:
        inside = [r for r in records if t0 <= r.start_ns <= t1]
        holds = [r for r in inside if r.name == T.HOLD_KERNEL_NAME]
        rest = [r for r in inside if r.name != T.HOLD_KERNEL_NAME]
        moved = [c for c in copies if t0 <= c.start_ns <= t1]
        if not holds:
            rows.append((ev_us, None, len(rest)))
            continue
        released = max(r.end_ns for r in holds)
        last = max([r.end_ns for r in rest] + [c.end_ns for c in moved] + [released])
        rows.append((ev_us, (last - released) / 1e3, len(rest)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    hold = T.StreamHold.create(DEV)
    assert hold is not None, T.StreamHold.why_not(DEV)
    fns = calls()
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    result = {}
    for name, fn in fns.items():
        result.setdefault(name, {})["fresh_us"] = statistics.median(s[0] for s in held_times(hold, fn, args.iters))
    tracer = T.cupti_tracer()
    print("cupti available", tracer.available(), "detaches", tracer.detaches)
    if tracer.available():
        for name, fn in fns.items():
            tracer.drain()
            tracer.drain_copies()
            tracer.begin()
            samples = held_times(hold, fn, args.iters, tracer)
            tracer.end()
            rows = extents(samples, tracer.drain(), tracer.drain_copies())
            ev = [r[0] for r in rows]
            ext = [r[1] for r in rows if r[1] is not None]
            result[name].update(traced_us=statistics.median(ev),
                                extent_us=statistics.median(ext) if ext else None,
                                extent_minus_events_us=statistics.median(r[1] - r[0] for r in rows if r[1] is not None)
                                if ext else None,
                                traced_calls=len(rows), calls_with_hold=len(ext),
                                kernels_per_call=statistics.median(r[2] for r in rows))
        for name, fn in fns.items():
            result[name]["after_us"] = statistics.median(s[0] for s in held_times(hold, fn, args.iters))
    print(f"{'call':10s} {'fresh':>8s} {'traced':>8s} {'after':>8s} {'extent':>8s} {'ext-ev':>8s} {'kern':>5s}")
    for name, r in result.items():
        f = lambda k: f"{r[k]:8.2f}" if r.get(k) is not None else f"{'-':>8s}"
        print(f"{name:10s} {f('fresh_us')} {f('traced_us')} {f('after_us')} {f('extent_us')} "
              f"{f('extent_minus_events_us')} {r.get('kernels_per_call', '-')!s:>5s}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
