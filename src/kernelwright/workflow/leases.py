"""Device leases: who may use which GPU (or CPU pseudo-device) for what.

Four kinds of lease:

* ``turn``: a coder's turn; the coder may run its own quick checks on the device
  (``CUDA_VISIBLE_DEVICES`` is set for it).  Up to ``turn_share`` turns share a device.
* ``check``: the orchestrator's check of an attempt; one check (or profile) per device, next to
  running turns.
* ``profile``: like ``check``.
* ``official``: a final evaluation; it needs a *quiet* device (nothing else leased on it) or,
  with ``quiet="host"``, a quiet host (nothing leased anywhere, the right setting when
  pseudo-devices share one CPU).  At most one official lease exists at a time.  While an
  official lease waits, the device it waits for (every device in host mode) takes no new
  lease of another kind, so official timing cannot starve.

A lease that cannot be granted now is recorded as *waiting* (visible in ``kernelwright run
status``); the caller tries again on its next step - nobody blocks.  The pool is behind the
small :class:`LeasePool` protocol so that an evaluation pool spread over machines
(``kernelwright.cluster``) can replace :class:`LocalLeasePool`.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Protocol

KINDS = ("turn", "check", "profile", "official")


@dataclass(frozen=True)
class Lease:
    id: int
    device: str          # "cuda:0" / "cpu:1"
    kind: str
    holder: str          # e.g. "attempt-7", "coder-2", "candidate-4"
    role: str            # coder | gate | profiler ...
    since: float         # time.time()

    @property
    def index(self) -> int:
        return int(self.device.split(":")[1])

    @property
    def device_type(self) -> str:
        return self.device.split(":")[0]


class LeasePool(Protocol):
    """What the orchestrator needs from a device scheduler."""

    def devices(self) -> List[str]: ...

    def try_acquire(self, kind: str, holder: str, role: str) -> Optional[Lease]:
        """A lease now, or None (the holder is then recorded as waiting)."""

    def release(self, lease: Lease) -> float:
        """Give the lease back; returns the seconds it was held."""

    def snapshot(self) -> List[Dict[str, object]]:
        """Held and waiting leases: {holder, kind, device (None while waiting), since}."""


class LocalLeasePool:
    """Leases over the devices of this machine (see the module docstring for the rules).

    Raises ValueError for an unknown kind or an empty device list.
    """

    def __init__(self, devices: List[str], quiet: str = "device", turn_share: int = 2):
        if not devices:
            raise ValueError("a lease pool needs at least one device")
        if quiet not in ("device", "host"):
            raise ValueError(f"quiet must be 'device' or 'host', not {quiet!r}")
        self._devices = list(devices)
        self.quiet = quiet
        self.turn_share = max(1, turn_share)
        self._held: Dict[int, Lease] = {}
        self._waiting: Dict[str, tuple] = {}      # holder -> (kind, role, since)
        self._reserved: Optional[str] = None       # device (or "host") held back for a waiting official
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def devices(self) -> List[str]:
        return list(self._devices)

    # -- rules -------------------------------------------------------------------------------
    def _on(self, device: str) -> List[Lease]:
        return [l for l in self._held.values() if l.device == device]

    def _blocked(self, device: str, holder: str) -> bool:
        """Held back for a waiting official lease (other than ``holder``'s own)."""
        if self._reserved is None:
            return False
        waiting_holder = next((h for h, w in self._waiting.items() if w[0] == "official"), None)
        if waiting_holder == holder:
            return False
        return self._reserved == "host" or self._reserved == device

    def _fits(self, kind: str, device: str) -> bool:
        on = self._on(device)
        if any(l.kind == "official" for l in on):
            return False
        if self.quiet == "host" and any(l.kind == "official" for l in self._held.values()):
            return False
        if kind == "turn":
            return sum(1 for l in on if l.kind == "turn") < self.turn_share
        if kind in ("check", "profile"):
            return not any(l.kind in ("check", "profile") for l in on)
        # official
        if any(l.kind == "official" for l in self._held.values()):
            return False
        if self.quiet == "host":
            return not self._held
        return not on

    def try_acquire(self, kind: str, holder: str, role: str) -> Optional[Lease]:
        if kind not in KINDS:
            raise ValueError(f"unknown lease kind {kind!r}")
        with self._lock:
            for lease in self._held.values():
                if lease.holder == holder:
                    return lease
            order = sorted(self._devices, key=lambda d: (len(self._on(d)), self._devices.index(d)))
            for device in order:
                if self._blocked(device, holder) or not self._fits(kind, device):
                    continue
                lease = Lease(next(self._ids), device, kind, holder, role, time.time())
                self._held[lease.id] = lease
                self._waiting.pop(holder, None)
                if kind == "official":
                    self._reserved = None
                return lease
            if holder not in self._waiting:
                self._waiting[holder] = (kind, role, time.time())
            if kind == "official" and self._reserved is None:
                self._reserved = "host" if self.quiet == "host" else order[0]
            return None

    def release(self, lease: Lease) -> float:
        with self._lock:
            self._held.pop(lease.id, None)
        return max(0.0, time.time() - lease.since)

    def snapshot(self) -> List[Dict[str, object]]:
        with self._lock:
            held = [{"holder": l.holder, "kind": l.kind, "device": l.device, "since": l.since, "role": l.role}
                    for l in self._held.values()]
            waiting = [{"holder": h, "kind": w[0], "device": None, "since": w[2], "role": w[1]}
                       for h, w in self._waiting.items()]
        return held + waiting
