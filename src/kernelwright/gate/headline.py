"""Which clock a trace's headline latency is taken on, and the per-trial statistics of each clock.

The worker reports raw samples per trial (``timing.TimingSamples``); this module, in the parent,
turns them into per-trial medians and decides the headline:

* ``device`` -- every trial had held iterations (the stream held while the call was enqueued),
  and CUPTI saw the held calls copy nothing from the device to the host.  A call that copies
  device data to the host could do its work on the CPU while the stream is held, where the
  device clock does not see it, so its headline falls back to ``eager``, with the reason; so does
  an untrusted solution whose copies CUPTI did not check.
* ``eager`` -- events with the device idle before the start (host launch included): when the
  stream could not be held (no cuda-python, the call waits for the device), or as above.
* ``cpu`` -- a perf_counter span (CPU runs).

CUPTI traces every held timed call (``timing.HeldTracing``); ``ClockTrials`` keeps each trial's
median kernel time of those calls and pairs each call's events with its own kernel time
(``phase_pairs``), which PHASE_MISMATCH judges trial by trial.

All times in milliseconds.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from kernelwright.gate import guards


def _median(xs: List[float]) -> Optional[float]:
    return float(statistics.median(xs)) if xs else None


def _mean(xs: List[float]) -> Optional[float]:
    return float(statistics.mean(xs)) if xs else None


@dataclass
class Headline:
    """The decided headline of one evaluation: ``latency_ms`` on ``clock`` (mean over trials of
    the per-trial medians), the eager latency beside it, and notes for the trace."""

    clock: str
    latency_ms: float
    per_trial_ms: List[float]
    eager_ms: Optional[float]
    notes: Dict[str, Any]


class PhasePairs(NamedTuple):
    """One trial's timed calls paired with its traced calls of the same inputs (ms, index by
    index): the timed latency, the traced call's CUPTI kernel-duration sum and its
    first-start-to-last-end span."""

    timed: List[float]
    kernel_sum: List[float]
    kernel_span: List[float]


@dataclass
class ClockTrials:
    """Per-trial medians of every clock of one evaluation, and each trial's traced held calls: their
    median kernel sum and span and each call's events beside its kernel time (``phase_pairs``)."""

    clocks: List[str] = field(default_factory=list)
    timed: List[float] = field(default_factory=list)        # latency_ms medians (device, else eager)
    eager: List[float] = field(default_factory=list)
    idle_walls: List[float] = field(default_factory=list)
    idle_empties: List[float] = field(default_factory=list)
    held_walls: List[float] = field(default_factory=list)
    held_empties: List[float] = field(default_factory=list)
    host: List[float] = field(default_factory=list)
    d2h_bytes: List[int] = field(default_factory=list)
    copies_traced: bool = False
    prerelease: List[int] = field(default_factory=list)      # per held traced call: kernels before the release
    prerelease_lead_us: List[float] = field(default_factory=list)   # per held traced call: hold end - first start
    prerelease_copies: List[int] = field(default_factory=list)     # per held traced call: copies/memsets before the release
    hold_impostors: List[int] = field(default_factory=list)        # per traced call: kernels named like the hold, not the gate's
    cupti_held: List[bool] = field(default_factory=list)
    kernel_sum: List[Optional[float]] = field(default_factory=list)    # per trial: median over its traced calls
    kernel_span: List[Optional[float]] = field(default_factory=list)   # (None: the trial traced no call)
    phase: List[PhasePairs] = field(default_factory=list)              # per trial: its timed/traced pairs
    hold_timeouts: int = 0
    hold_kind: Optional[str] = None
    hold_error: Optional[str] = None

    def add(self, s: Mapping[str, Any]) -> Optional[str]:
        """Take one trial's samples; a one-line reason when they are impossible
        (TIMER_INCONSISTENT), else None."""
        lat = list(s.get("latency_ms") or [])
        clock = s.get("clock", "cpu")
        if not lat or any((not isinstance(x, (int, float))) or x != x or x <= 0 or x == float("inf") for x in lat):
            return f"impossible latencies reported: {lat[:5]}"
        eager = list(s.get("eager_latency_ms") or [])
        walls = list(s.get("wall_ms") or [])
        idle = lat if clock == "cpu" else eager      # the samples taken with the device idle
        factor, slack = guards.EVENTS_OVER_WALL_FACTOR, guards.EVENTS_OVER_WALL_SLACK_MS
        if idle and walls and statistics.median(idle) > factor * statistics.median(walls) + slack:
            return "event latencies exceed the wall-clock span they were recorded in"
        spans = list(s.get("held_span_ms") or [])
        if clock == "device" and spans and statistics.median(lat) > factor * statistics.median(spans) + slack:
            return "held event latencies exceed the wall-clock span they were recorded in"
        self.clocks.append(clock)
        self.timed.append(statistics.median(lat))
        if eager:
            self.eager.append(statistics.median(eager))
        for values, into in ((walls, self.idle_walls), (s.get("empty_wall_ms"), self.idle_empties),
                             (s.get("held_wall_ms"), self.held_walls), (s.get("empty_held_wall_ms"), self.held_empties),
                             (s.get("host_ms"), self.host)):
            if values:
                into.append(statistics.median(values))
        self.d2h_bytes += [int(x) for x in (s.get("cupti_d2h_bytes") or [])]
        self.copies_traced = self.copies_traced or bool(s.get("cupti_copies_traced"))
        self.prerelease += [int(x) for x in (s.get("cupti_prerelease") or [])]
        self.prerelease_lead_us += [float(x) for x in (s.get("cupti_prerelease_lead_us") or [])]
        self.prerelease_copies += [int(x) for x in (s.get("cupti_prerelease_copies") or [])]
        self.hold_impostors += [int(x) for x in (s.get("cupti_hold_records") or [])]
        self.cupti_held += [bool(x) for x in (s.get("cupti_held") or [])]
        self._add_window(s)
        self.hold_timeouts += int(s.get("hold_timeouts") or 0)
        self.hold_kind = self.hold_kind or s.get("hold_kind")
        self.hold_error = self.hold_error or s.get("hold_error")
        return None

    def _add_window(self, s: Mapping[str, Any]) -> None:
        """One trial's traced calls: the medians of their kernel sum and span (ms), and each
        call's pair of events and kernel time (none without the parent's list of them)."""
        sums, spans = list(s.get("kernel_sum_ms") or []), list(s.get("kernel_span_ms") or [])
        self.kernel_sum.append(_median(sums))
        self.kernel_span.append(_median(spans))
        self.phase.append(phase_pairs(s))

    def window(self, trial: int) -> Optional[Tuple[float, float]]:
        """(median kernel sum, median kernel span) of trial ``trial``'s traced calls (ms), or None
        where that trial traced no call."""
        if trial >= len(self.kernel_sum) or self.kernel_sum[trial] is None or self.kernel_span[trial] is None:
            return None
        return self.kernel_sum[trial], self.kernel_span[trial]

    def kernel_time_ms(self) -> Tuple[Optional[float], Optional[float]]:
        """(kernel sum, kernel span) of a traced call, ms: the mean over the trials of their
        traced calls' medians (as the latency is the mean over trials of their medians); None
        where nothing was traced."""
        sums = [x for x in self.kernel_sum if x is not None]
        spans = [x for x in self.kernel_span if x is not None]
        return _mean(sums), _mean(spans)

    def phase_ratios(self) -> List[Optional[float]]:
        """Per trial: its timed calls' median latency ratio to its traced calls' kernel time on
        the same inputs (``guards.phase_ratio``; None where the trial has no pair)."""
        return [guards.phase_ratio(*pairs) for pairs in self.phase]

    def phase_mismatch(self) -> Tuple[Optional[str], str]:
        """(PHASE_MISMATCH or None, message): every trial against its own traced calls
        (``guards.phase_verdict_by_trial``)."""
        return guards.phase_verdict_by_trial(self.phase)

    def decide(self, trusted: bool = False) -> Headline:
        """The headline clock and latency (see the module docstring).  An untrusted solution gets
        device time only when CUPTI checked the held calls' copies; ``trusted`` (the baselines)
        skips that check."""
        notes: Dict[str, Any] = {}
        if self.hold_kind:
            notes["hold"] = self.hold_kind
        if self.hold_error:
            notes["hold_unavailable"] = self.hold_error
        if self.hold_timeouts:
            notes["hold_timeouts"] = (f"{self.hold_timeouts} held iteration(s) timed out (the call waits for the "
                                      "device while the stream is held) or found the hold not resident: their "
                                      "events are not device time")
        if any(x > 0 for x in self.prerelease_lead_us):
            notes["prerelease_lead_us"] = round(max(self.prerelease_lead_us), 3)   # < HOLD_EXIT_SPREAD_NS: the CTAs' exit
        if self.host:
            notes["host_path_us"] = round(_mean(self.host) * 1e3, 1)
        clock = "cpu" if all(c == "cpu" for c in self.clocks) else (
            "device" if all(c == "device" for c in self.clocks) else "eager")
        per_trial = list(self.timed)
        if clock == "device":
            notes["device_time_us"] = round(_mean(self.timed) * 1e3, 3)   # kept when the headline is refused
        if clock == "device" and any(self.d2h_bytes):
            clock = "eager"
            notes["device_time_refused"] = (f"the call copied {max(self.d2h_bytes)} bytes from the device to the host "
                                            "in a traced call: its host work could hide while the stream is held, "
                                            "so the headline is the eager latency")
        elif clock == "device" and any(self.prerelease_copies):
            clock = "eager"
            notes["device_time_refused"] = (f"{max(self.prerelease_copies)} copy or memset of a traced call started "
                                            "while the stream was held (a copy engine is not held), so the headline "
                                            "is the eager latency")
        elif clock == "device" and not trusted and not self.copies_traced:
            clock = "eager"
            notes["device_time_refused"] = ("CUPTI did not check the call's device-to-host copies, so host work "
                                            "could hide while the stream is held: the headline is the eager latency")
        if clock == "eager" and self.eager and len(self.eager) == len(self.timed):
            per_trial = list(self.eager)
        eager = _mean(self.eager)
        return Headline(clock=clock, latency_ms=float(statistics.mean(per_trial)), per_trial_ms=per_trial,
                        eager_ms=eager, notes=notes)

    def unmeasured_work(self, headline: Headline) -> Optional[str]:
        """UNMEASURED_WORK: the device-synchronised wall clock saw much more than the events did
        (work on another stream that the call's end event does not wait for).  Checked on each
        clock's own iterations: eager (start record -> synchronised, less an empty measurement)
        against the eager latency, held (release -> synchronised, less an empty held measurement)
        against the device time; and any kernel of a held CUPTI call that started before the
        hold's release (the blocking kernel should make that impossible)."""
        limit = guards.UNMEASURED_WORK_FACTOR
        if any(self.hold_impostors):
            return (f"a traced call ran {max(self.hold_impostors)} kernel(s) named like the gate's hold kernel besides "
                    "the hold itself: their time would leave the kernel time and move the release")
        if any(self.prerelease):
            return (f"{max(self.prerelease)} kernel(s) of the call started while the stream was held (CUPTI): "
                    "work ran before the clock started")
        if self.idle_walls and self.idle_empties and self.eager:
            excess = _mean(self.idle_walls) - _mean(self.idle_empties)
            eager = _mean(self.eager)
            if excess > limit * eager + guards.UNMEASURED_WORK_SLACK_MS:
                return (f"device-synchronised wall clock {excess:.3f} ms vs events {eager:.3f} ms (eager): "
                        "work ran outside the measured span (another stream?)")
        if headline.clock == "device" and self.held_walls and self.held_empties:
            excess = _mean(self.held_walls) - _mean(self.held_empties)
            if excess > limit * headline.latency_ms + guards.UNMEASURED_WORK_SLACK_MS:
                return (f"device-synchronised wall clock after the release {excess:.3f} ms vs device time "
                        f"{headline.latency_ms:.3f} ms: work ran outside the measured span (another stream?)")
        return None


def phase_pairs(s: Mapping[str, Any]) -> PhasePairs:
    """(timed, kernel sum, kernel span) of one trial's samples ``s``, call by call (ms): the trial's
    traced call j is its held timed iteration ``s["cupti_timed_iters"][j]`` (the parent's own
    record of the held iterations, ``evaluate._TimingConversation``; no list, no pairs), and only
    iterations timed on the trial's headline clock pair up (a held iteration whose hold released,
    for device time)."""
    by_iteration = dict(zip(s.get("latency_iters") or [], s.get("latency_ms") or []))
    timed, sums, spans = [], [], []
    drawn = list(s.get("cupti_timed_iters") or [])
    for it, ksum, kspan in zip(drawn, s.get("kernel_sum_ms") or [], s.get("kernel_span_ms") or []):
        latency = by_iteration.get(it)
        if latency is not None:
            timed.append(latency)
            sums.append(ksum)
            spans.append(kspan)
    return PhasePairs(timed, sums, spans)


def graph_agreement(headline: Headline, graph_ms: Optional[float]) -> Tuple[Optional[float], Optional[str]]:
    """(trial 0's device time / graph replay, a SUSPICIOUS message or None).  The replays run in
    trial 0 on the inputs of its held iterations (``evaluate.paired_graph_seeds``), so both sides
    are medians over the same draws.  Both clocks hide the host launch, so an honest call reads
    about the same on both; device time far below the replay means the call does less when timed
    eagerly than when captured (DEVICE_GRAPH_MISMATCH)."""
    if headline.clock != "device" or not graph_ms:
        return None, None
    device_ms = headline.per_trial_ms[0] if headline.per_trial_ms else headline.latency_ms
    ratio = device_ms / graph_ms
    if ratio < guards.DEVICE_GRAPH_MIN_RATIO:
        return ratio, (f"device time {device_ms * 1e3:.1f} us (trial 0) is {ratio:.2f}x the CUDA-graph replay "
                       f"{graph_ms * 1e3:.1f} us of the same call on the same inputs")
    return ratio, None


def graph_disagreement(device_ms: float, graph_ms: Optional[float], kernel_ms: Optional[float],
                       span_ms: Optional[float]) -> Optional[str]:
    """Why trial 0's device time and the CUDA-graph replay of the same call differ by more than
    ``guards.DEVICE_GRAPH_BAND`` (None where they agree or a side is missing), read from the third
    clock on the same inputs: the traced held calls' kernel sum and span (CUPTI, ms).  The side
    the span is closer to, where within the band, names the other side the outlier; the span's gaps
    (span - sum) are the time between the call's kernels.  Every figure in the message is
    measured; it explains, it does not judge (DEVICE_GRAPH_MISMATCH does)."""
    if not graph_ms or not device_ms:
        return None
    band = guards.DEVICE_GRAPH_BAND
    ratio = device_ms / graph_ms
    if abs(ratio - 1) <= band:
        return None
    us = lambda ms: f"{ms * 1e3:.1f} us"
    msg = f"device time {us(device_ms)} is {ratio:.2f}x the graph replay {us(graph_ms)}"
    if not span_ms:
        return msg + "; no traced call to compare with"
    msg += f"; the traced calls' kernels ran {us(kernel_ms or 0.0)} in a {us(span_ms)} span"
    off = {name: abs(span_ms / ms - 1) for name, ms in (("device time", device_ms), ("graph replay", graph_ms))}
    near = min(off, key=off.get)
    if off[near] <= band:
        other = "graph replay" if near == "device time" else "device time"
        return msg + f", within {off[near]:.0%} of the {near}: the {other} is the outlier"
    gaps = max(0.0, span_ms - (kernel_ms or 0.0))
    return msg + f" ({us(gaps)} between kernels), within {band:.0%} of neither"


def cupti_span_reference(clocks: ClockTrials, headline: Headline) -> float:
    """What the CUPTI span is compared with (ms): the headline when every traced call was held
    (the span is then device time too), else the eager latency (the traced calls ran with the
    device idle)."""
    if clocks.cupti_held and all(clocks.cupti_held):
        return headline.latency_ms
    return headline.eager_ms or headline.latency_ms
