"""Where does a private stream's kernel run relative to the device-time clock's blocking kernel?
The red-team case `held_side_stream` launches a 200 µs spin kernel on a private stream that does
not wait for the caller's stream; the gate timed it at 0.10 ms by device time on the H200
(2026-12-01).  This probe repeats that call outside the gate, with events on the private stream,
and prints per case (µs, medians of 20): the spin kernel alone; then, held, the start event to the
end event (what the gate reports) and to the private stream's own events before and after the
kernel (< 0: it ran before the clock started).

    python experiments/side_stream_probe.py [--rows 1,33,1000] [--json PATH]
"""
import argparse
import json
import statistics

import torch
import triton
import triton.language as tl

from kernelwright.gate import timing as T

SPIN_NS = 200_000


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _spin(y_ptr, SPIN: tl.constexpr):
    t0 = _now()
    while _now() - t0 < SPIN:
        pass
    tl.store(y_ptr + tl.program_id(0), 1.0)


def _events(n):
    return [torch.cuda.Event(enable_timing=True) for _ in range(n)]


def measure(rows: int, hold, iters: int = 20) -> dict:
    held, side = torch.cuda.current_stream(), torch.cuda.Stream()
    y = torch.zeros(rows, device="cuda")
    with torch.cuda.stream(side):
        _spin[(rows,)](y, SPIN=SPIN_NS)     # compiled and loaded before any hold
    torch.cuda.synchronize()
    alone, total, side_start, side_end, outcomes = [], [], [], [], []
    for _ in range(iters):
        a, b = _events(2)
        a.record(side)
        with torch.cuda.stream(side):
            _spin[(rows,)](y, SPIN=SPIN_NS)
        b.record(side)
        torch.cuda.synchronize()
        alone.append(a.elapsed_time(b) * 1e3)
    for _ in range(iters):
        start, end, s0, s1 = _events(4)
        epoch = hold.begin(held)
        start.record(held)
        s0.record(side)
        with torch.cuda.stream(side):
            _spin[(rows,)](y, SPIN=SPIN_NS)
        s1.record(side)
        held.wait_stream(side)
        end.record(held)
        hold.release(epoch)
        torch.cuda.synchronize()
        outcomes.append(hold.outcome(epoch))
        total.append(start.elapsed_time(end) * 1e3)
        side_start.append(start.elapsed_time(s0) * 1e3)
        side_end.append(start.elapsed_time(s1) * 1e3)
    med = lambda xs: round(statistics.median(xs), 1)
    return {"rows": rows, "spin_alone_us": med(alone), "held_start_to_end_us": med(total),
            "held_start_to_side_start_us": med(side_start), "held_start_to_side_end_us": med(side_end),
            "outcomes": sorted(set(outcomes))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1,33,1000", help="spin kernel programs, comma-separated")
    ap.add_argument("--json", default=None, help="write the rows here")
    a = ap.parse_args()
    dev = torch.device("cuda", torch.cuda.current_device())
    hold = T.StreamHold.create(dev)
    if hold is None:
        raise SystemExit(f"no stream hold: {T.StreamHold.why_not(dev)}")
    print("hold:", hold.kind, "ctas", hold.ctas, "shared bytes", hold.shared_bytes)
    rows = [measure(int(r), hold) for r in a.rows.split(",")]
    for r in rows:
        print(json.dumps(r))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
