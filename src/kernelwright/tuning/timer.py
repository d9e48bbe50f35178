"""Gate-style timing of one call on a CUDA device, for the tuning harnesses.

Every iteration: ``prep(i)`` (new input contents, poisoned outputs), the L2 flushed (twice its
size zeroed), then either the device idle before the start event (``busy=False``: host launch
included, the gate's eager clock) or held by ``torch.cuda._sleep(busy_cycles)`` while the host
launches (``busy=True``: host time hidden, the call's device time); start event, the call, end
event.  The result is the median over the timed iterations after ``warm`` warm-up ones, in µs.
With ``smoke`` (CPU plumbing checks through the Triton interpreter) it is the wall time of one
call after ``prep(0)``.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


class Timer:
    def __init__(self, device: torch.device, smoke: bool = False, busy_cycles: int = 1_000_000):
        self.smoke = smoke
        self.busy_cycles = busy_cycles
        if smoke:
            return
        l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20))
        self.flush_buf = torch.empty(2 * l2, dtype=torch.uint8, device=device)

    def loop(self, call: Callable[[int], object], prep: Callable[[int], object], busy: bool,
             warm: int, n: int) -> float:
        if self.smoke:
            prep(0)
            t = time.perf_counter()
            call(0)
            return (time.perf_counter() - t) * 1e6
        times = []
        for i in range(warm + n):
            prep(i)
            self.flush_buf.zero_()
            if busy:
                torch.cuda._sleep(self.busy_cycles)      # GPU work ahead of the start event
            else:
                torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            call(i)
            end.record()
            torch.cuda.synchronize()
            if i >= warm:
                times.append(start.elapsed_time(end) * 1e3)
        return statistics.median(times)
