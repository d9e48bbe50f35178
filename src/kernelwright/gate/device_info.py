"""Device ceilings for the roofline: measured copy bandwidth and matmul rates, cached per GPU model.

``measure_ceilings`` times (CUDA events, median of repeats) a 4 GiB device-to-device copy
(bytes read + written), an 8192^3 bf16 matmul and an 8192^3 FP8 ``torch._scaled_mm``.  Results
are cached in ``$KERNELWRIGHT_CACHE`` (default ``~/.cache/kernelwright``)/devices.json under the
GPU's name.  Known values ship as defaults so that a bench run without a cache still has a
roofline; each default says where it came from.

``peak`` values are the vendor's datasheet numbers: a measured latency implying more than the
peak is physically impossible (the SUSPICIOUS rule); ``measured`` values are what the roofline
fraction is computed against.

Only measured values are stored as measured.  When the FP8 matmul cannot be timed (no
``torch._scaled_mm`` for this GPU or build), ``measured`` has no ``fp8_flops`` and says why in
``fp8_flops_unmeasured``; a roofline floor for FP8 work then has no FLOP term
(``RooflineWork.floor_s``).  Caches written before this rule held an FP8 rate of exactly 2 x the
BF16 rate when the timing failed (an estimate labelled measured): ``load_ceilings`` drops such a
value and says so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Optional

import torch

# Datasheet peaks (dense) and measured anchors; sources in the "source" strings.
KNOWN_DEVICES: Dict[str, Dict] = {
    "NVIDIA H200": {
        "measured": {"copy_bandwidth_Bps": 4.26e12, "bf16_flops": 754e12, "fp8_flops": 1.388e15},
        "peak": {"copy_bandwidth_Bps": 4.8e12, "bf16_flops": 989e12, "fp8_flops": 1979e12,
                 "launch_latency_s": 0.5e-6},
        "source": "kernelwright device-info --measure on one H200 (2026-11-29, results/h200/2026-11-29-v1-moe-attention/"
                  "device-info.txt); the launch term is measured in each run (device time of one trivial kernel); "
                  "peaks from the H200 SXM datasheet, launch peak below any measured empty call",
    },
    "NVIDIA H100 80GB HBM3": {
        "measured": {"copy_bandwidth_Bps": 3.0e12, "bf16_flops": 750e12, "fp8_flops": 1.35e15},
        "peak": {"copy_bandwidth_Bps": 3.35e12, "bf16_flops": 989e12, "fp8_flops": 1979e12},
        "source": "H100 SXM datasheet peaks; measured column is an estimate, run `kernelwright device-info --measure`",
    },
}


def resolve_device(device) -> torch.device:
    """A torch.device with an explicit index for CUDA ("cuda" -> "cuda:<current>")."""
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def cache_dir() -> Path:
    return Path(os.environ.get("KERNELWRIGHT_CACHE", Path.home() / ".cache" / "kernelwright"))


def _cache_file() -> Path:
    return cache_dir() / "devices.json"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


LEGACY_FP8_ESTIMATE = ("dropped: the cached FP8 rate was exactly 2 x the BF16 rate, the estimate an older "
                       "kernelwright stored as measured when the FP8 timing failed")


def _without_invented_rates(measured: Dict) -> Dict:
    """``measured`` without an FP8 rate that is the legacy 2 x BF16 stand-in (see the module
    docstring); every other entry unchanged."""
    fp8, bf16 = measured.get("fp8_flops"), measured.get("bf16_flops")
    if fp8 is not None and bf16 is not None and fp8 == 2 * bf16:
        kept = {k: v for k, v in measured.items() if k != "fp8_flops"}
        kept["fp8_flops_unmeasured"] = LEGACY_FP8_ESTIMATE
        return kept
    return measured


def load_ceilings(device: torch.device) -> Optional[Dict]:
    """{'measured': {...}, 'peak': {...}, 'source': str} for this device, or None (e.g. CPU).
    ``measured`` may lack ``fp8_flops`` (then ``fp8_flops_unmeasured`` says why)."""
    name = device_name(device)
    try:
        cached = json.loads(_cache_file().read_text()).get(name)
    except (OSError, json.JSONDecodeError):
        cached = None
    known = KNOWN_DEVICES.get(name)
    if cached:
        measured = _without_invented_rates(cached["measured"])
        peak = (known or {}).get("peak") or {k: v * 1.0 for k, v in measured.items() if isinstance(v, (int, float))}
        return {"measured": measured, "peak": peak, "source": cached.get("source", "measured")}
    return known


_LAUNCH_NOW: Dict[str, Optional[float]] = {}


def launch_latency_now(device: torch.device, iterations: int = 30) -> Optional[float]:
    """The device time (seconds) of one trivial kernel, measured now in this process by the gate's
    headline clock (``timing.device_time_ms``: the stream held while it is enqueued): the least
    any call that launches a kernel can take on that clock.  Measured once per process and
    device; None off CUDA or where the stream cannot be held."""
    if device.type != "cuda":
        return None
    key = str(device)
    if key not in _LAUNCH_NOW:
        from kernelwright.gate.timing import device_time_ms

        x = torch.zeros(1, device=device)
        ms = device_time_ms(lambda: x.add_(1), device, iterations)
        _LAUNCH_NOW[key] = None if ms is None else ms * 1e-3
    return _LAUNCH_NOW[key]


def ceilings_for_run(device: torch.device) -> Optional[Dict]:
    """``load_ceilings`` with the launch term of the floor measured now (``launch_latency_now``);
    without one (no device-time clock) the floor has no launch term.  The 'measured' dict says
    where the value came from (``launch_latency_source``)."""
    ceilings = load_ceilings(device)
    if ceilings is None:
        return None
    measured = dict(ceilings["measured"])
    now = launch_latency_now(device)
    if now is not None:
        measured["launch_latency_s"] = now
        measured["launch_latency_source"] = "measured in this run: device time of one trivial kernel, median of 30"
    else:
        measured.pop("launch_latency_s", None)
        measured["launch_latency_source"] = "none: the stream could not be held, so the floor has no launch term"
    return {**ceilings, "measured": measured}


def _time_ms(fn, repeats: int = 10) -> float:
    from kernelwright.gate.timing import eager_event_ms

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = sorted(eager_event_ms(fn) for _ in range(repeats))
    return times[len(times) // 2]


def measure_ceilings(device: torch.device, save: bool = True) -> Dict:
    """Measure copy bandwidth (B/s), bf16 and fp8 matmul rates (FLOP/s) on ``device``.

    Raises:
        RuntimeError: no CUDA device.
    """
    device = resolve_device(device)
    if device.type != "cuda":
        raise RuntimeError("device ceilings are measured on a CUDA device")
    torch.cuda.set_device(device)
    n = 1 << 30
    buffers = [torch.empty(n, dtype=torch.float32, device=device).uniform_()]
    buffers.append(torch.empty_like(buffers[0]))
    copy_ms = _time_ms(lambda: buffers[1].copy_(buffers[0]))
    buffers.clear()
    size = 8192
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    bf16_ms = _time_ms(lambda: a @ b)
    fp8_flops, fp8_error = None, None
    try:
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)
        fp8_ms = _time_ms(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        fp8_flops = 2 * size**3 / (fp8_ms * 1e-3)
    except Exception as exc:   # no FP8 matmul here: record why, invent nothing
        fp8_error = f"the FP8 matmul could not be timed ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})"
    from kernelwright.gate.timing import device_time_ms

    tiny = torch.zeros(1, device=device)
    launch_ms = device_time_ms(lambda: tiny.add_(1), device, 50)
    measured = {
        "copy_bandwidth_Bps": 2 * 4 * n / (copy_ms * 1e-3),
        "bf16_flops": 2 * size**3 / (bf16_ms * 1e-3),
    }
    if fp8_flops is not None:
        measured["fp8_flops"] = fp8_flops
    else:
        measured["fp8_flops_unmeasured"] = fp8_error
    if launch_ms is not None:
        measured["launch_latency_s"] = launch_ms * 1e-3
    name = device_name(device)
    record = {"measured": measured, "source": "kernelwright device-info --measure"}
    if save:
        path = _cache_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            table = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            table = {}
        table[name] = record
        path.write_text(json.dumps(table, indent=2))
    peak = (KNOWN_DEVICES.get(name) or {}).get("peak") or {
        **{k: v for k, v in measured.items() if isinstance(v, float)}, "launch_latency_s": 1e-6}
    return {"measured": measured, "peak": peak, "source": record["source"], "name": name}
