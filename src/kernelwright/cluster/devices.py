"""Which device each pool worker owns, and how it is pinned to it.

A pool worker for ``cuda:i`` is started with ``CUDA_VISIBLE_DEVICES`` set to the one physical
GPU behind index ``i`` of the parent's view (the parent's own ``CUDA_VISIBLE_DEVICES`` is
honoured: with ``CUDA_VISIBLE_DEVICES=4,6`` in the parent, ``cuda:1`` is physical GPU 6).  In
the worker that GPU is then ``cuda:0``; it calls ``torch.cuda.set_device(0)`` and every gate
worker it spawns for a solution inherits the same one-GPU view, so neither the trusted pool
worker nor the solution can touch another GPU.

``cpu`` slots are pseudo-devices for tests and demos: several of them share the host's cores,
so their timings say nothing (they exist to exercise scheduling, streaming and failure
handling on a machine without GPUs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Union

DeviceSpec = Union[None, int, str, Sequence[Union[str, int]]]


@dataclass(frozen=True)
class DeviceSlot:
    """One pool worker's device."""

    label: str                  # what leases and traces show: "cuda:3", "cpu#1"
    kind: str                   # "cuda" | "cpu"
    index: int                  # index in the parent's view (cuda), slot number (cpu)
    gate_device: str            # the device string the gate uses inside the worker
    env: Dict[str, str] = field(default_factory=dict)   # set in the worker before torch touches CUDA
    threads: Optional[int] = None                      # torch intra-op threads (cpu pseudo-devices)

    @property
    def physical(self) -> Optional[str]:
        return self.env.get("CUDA_VISIBLE_DEVICES") if self.kind == "cuda" else None


def _parent_visible() -> Optional[List[str]]:
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    return [p.strip() for p in raw.split(",") if p.strip()]


def cuda_device_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # pragma: no cover - broken driver
        return 0


def resolve_devices(devices: DeviceSpec = None, kind: str = "cuda", visible: Optional[int] = None) -> List[DeviceSlot]:
    """The slots of a pool.

    ``devices``: None (every visible GPU for ``kind="cuda"``, one slot for ``kind="cpu"``);
    an int N (the first N GPUs, or N cpu pseudo-devices); ``"cuda:0,cuda:2"`` / ``"0,2"``; or a
    list such as ``["cuda:0", "cuda:2"]`` / ``[0, 2]`` / ``["cpu", "cpu", "cpu"]``.

    Raises ValueError for a GPU that is not visible, for the same GPU twice (two jobs must
    never share a GPU while one is being timed) and for mixing cpu and cuda slots.
    """
    kind = "cuda" if str(kind).startswith("cuda") else "cpu"
    if isinstance(devices, str):
        devices = [d for d in devices.split(",") if d.strip()]
    if devices is None or isinstance(devices, int):
        if kind == "cpu":
            names = ["cpu"] * (devices if isinstance(devices, int) else 1)
        else:
            count = cuda_device_count() if visible is None else visible
            n = count if devices is None else devices
            if n > count:
                raise ValueError(f"{n} GPUs requested, {count} visible")
            names = [f"cuda:{i}" for i in range(n)]
    else:
        names = [f"cuda:{d}" if isinstance(d, int) or str(d).strip().isdigit() else str(d).strip() for d in devices]
    if not names:
        raise ValueError("no device for the pool: no GPU visible, or a pool size below 1 "
                         "(CLI: --pool N with N >= 1 GPUs; Python: devices=['cpu', 'cpu'] for a CPU pool)")
    kinds = {"cuda" if n.startswith("cuda") else n for n in names}
    if kinds - {"cuda", "cpu"}:
        raise ValueError(f"unknown device(s) {sorted(kinds - {'cuda', 'cpu'})}: use cuda:N or cpu")
    if len(kinds) > 1:
        raise ValueError("a pool is either all cuda or all cpu")
    if kinds == {"cpu"}:
        threads = max(1, (os.cpu_count() or 1) // len(names))
        return [DeviceSlot(label=f"cpu#{i}", kind="cpu", index=i, gate_device="cpu", threads=threads)
                for i in range(len(names))]
    indices = []
    for n in names:
        rest = n[len("cuda"):].lstrip(":")
        indices.append(int(rest) if rest else 0)
    if len(set(indices)) != len(indices):
        raise ValueError(f"the same GPU twice in {names}: a GPU runs one job at a time")
    count = cuda_device_count() if visible is None else visible
    parent = _parent_visible()
    slots = []
    for i in indices:
        if i >= count:
            raise ValueError(f"cuda:{i} is not visible here ({count} GPU(s) visible)")
        physical = parent[i] if parent is not None and i < len(parent) else str(i)
        slots.append(DeviceSlot(label=f"cuda:{i}", kind="cuda", index=i, gate_device="cuda:0",
                                env={"CUDA_VISIBLE_DEVICES": physical}))
    return slots


def pin_current_process(slot: DeviceSlot) -> Optional[str]:
    """In a freshly started pool worker: apply the slot's environment and select its device.

    Returns an error message when pinning is impossible (CUDA already initialised in this
    process with another view), None when pinned."""
    os.environ.update(slot.env)
    if slot.kind == "cpu":
        if slot.threads:
            os.environ.setdefault("OMP_NUM_THREADS", str(slot.threads))
            try:
                import torch

                torch.set_num_threads(slot.threads)
            except Exception:
                pass
        return None
    import torch

    if torch.cuda.is_initialized():
        return "CUDA was initialised before CUDA_VISIBLE_DEVICES could be set: the worker would see every GPU"
    if not torch.cuda.is_available() or torch.cuda.device_count() != 1:
        return (f"expected exactly one visible GPU with CUDA_VISIBLE_DEVICES={slot.env.get('CUDA_VISIBLE_DEVICES')}, "
                f"torch sees {torch.cuda.device_count()}")
    torch.cuda.set_device(0)
    return None


def describe_gpu(device: str) -> Dict[str, str]:
    """Name and UUID of the (single visible) GPU, for leases and the measurement record."""
    info: Dict[str, str] = {}
    try:
        import torch

        if device.startswith("cuda") and torch.cuda.is_available():
            props = torch.cuda.get_device_properties(torch.device(device))
            info["name"] = props.name
            uuid = getattr(props, "uuid", None)
            if uuid is not None:
                info["uuid"] = str(uuid)
    except Exception:
        pass
    return info
