"""Does the device-time clock's blocking kernel hold as long as the host needs, and does it keep
other streams off the device?  Prints one line per case: hold length asked, outcome, and where a
kernel queued on another stream ran relative to the release (ms; < 0: it ran during the hold).
The first case with the other stream launches its kernel for the first time: under CUDA's lazy
module loading that launch waits for the device, so the host cannot release the hold and it
times out (2026-12-01 on the H200: 50 ms); the gate's warm-up calls load a solution's kernels.

    python experiments/hold_probe.py
"""
import time

import torch

from kernelwright.gate import timing as T


def main() -> None:
    dev = torch.device("cuda", torch.cuda.current_device())
    hold = T.StreamHold.create(dev)
    print("hold:", hold and hold.kind, "ctas", hold and hold.ctas, "smem", hold and hold.shared_bytes, T.StreamHold.why_not(dev))
    held = torch.cuda.current_stream()
    other = torch.cuda.Stream()
    x = torch.zeros(1 << 20, device=dev)
    loaded = False
    for wait_ms in (0.0, 0.1, 1.0, 5.0, 20.0):
        for with_other in (False, True):
            torch.cuda.synchronize()
            start, other_done = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            epoch = hold.begin(held)
            start.record(held)
            if with_other:
                with torch.cuda.stream(other):
                    x.add_(1)
                    other_done.record(other)
            t0 = time.perf_counter()
            while (time.perf_counter() - t0) * 1e3 < wait_ms:
                pass
            hold.release(epoch)
            torch.cuda.synchronize()
            rel = start.elapsed_time(other_done) if with_other else float("nan")
            first = " (first launch: lazy loading)" if with_other and not loaded else ""
            loaded = loaded or with_other
            print(f"wait {wait_ms:5.1f} ms other={with_other!s:5} outcome={hold.outcome(epoch):9} "
                  f"other-kernel-after-release {rel:8.3f} ms  held (globaltimer us, SM kcycles) {hold.held(epoch)}{first}")


if __name__ == "__main__":
    main()
