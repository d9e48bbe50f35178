"""Markdown tables of committed bench summaries (the README's results table).

``results_table(paths)``: one row per (record, definition, solution): passed, the headline clock,
device µs (mean and per regime), eager and graph µs, × the reference, × each baseline (the
contest's metric on the headline clock of the same run), roofline mean / min.
``regime_table(paths)``: per solution and regime: workloads, latency, achieved TB/s and TFLOP/s,
× the reference.
``workload_table(paths, definition, ours)``: one row per workload of one definition, merged over
summaries of the same workloads (e.g. ours and the baselines run as two ``kernelwright bench``
calls): our latency, the roofline floor and floor / ours, then every other candidate's latency and
its ratio to ours (> 1: ours is faster); the last row holds the means over the workloads each
column has.
Every number comes from the summary files (written by ``kernelwright bench``); a summary written
before a field existed is rebuilt in memory from the traces beside it.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Iterable, List, Optional


def _fmt(x: Optional[float], spec: str = ".1f", unit: str = "") -> str:
    return "—" if x is None else f"{x:{spec}}{unit}"


def _ratio(x: Optional[float]) -> str:
    """A speed-up: one decimal from 1 up, two significant digits below (a CPU demo reads 0.0056×)."""
    if x is None:
        return "—"
    return f"{x:.1f}×" if abs(x) >= 1 else f"{x:.2g}×"


def _short_name(name: str) -> str:
    """The CLI's alias of a definition (``kernelwright defs``), else the name itself."""
    from kernelwright import definitions

    try:
        return definitions.resolve(name).short
    except definitions.UnknownDefinition:
        return name


def _record_name(path: Path) -> str:
    """The two folders above a summary (``<run>/<set>``), the way the README names records."""
    parts = Path(path).resolve().parts
    return "/".join(parts[-3:-1])


def _load(path: Path):
    from kernelwright.report.summary import load_summary, with_regime_stats

    return with_regime_stats(load_summary(path), Path(path).parent)


def _clock(sol) -> str:
    clocks = sol.get("clocks") or {}
    if not clocks:
        return "eager"        # summaries written before the device clock existed
    return " / ".join(f"{c} {n}" if len(clocks) > 1 else c for c, n in sorted(clocks.items(), key=lambda kv: -kv[1]))


def results_table(paths: Iterable[Path]) -> str:
    lines = ["| record | definition | solution | passed | clock | µs on that clock (per regime) | eager µs | graph µs | "
             "× reference | × baselines (mean over common workloads) | roofline mean / min |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for path in paths:
        summary = _load(path)
        record = _record_name(path)
        for name, d in summary["definitions"].items():
            for sol in d["solutions"].values():
                regimes = "; ".join(f"{r}: {v:.1f}" for r, v in sol["regime_latency_us"].items())
                vs = "; ".join(f"`{k}`: {v['mean_speedup']:.2f}×" for k, v in sol["speedup_vs"].items())
                lines.append(
                    f"| {record} | {_short_name(name)} | {sol['label']} | {sol['passed']}/{sol['workloads']} | "
                    f"{_clock(sol)} | {_fmt(sol['mean_latency_us'])} ({regimes}) | "
                    f"{_fmt(sol.get('mean_eager_latency_us'))} | {_fmt(sol.get('mean_graph_latency_us'))} | "
                    f"{_ratio(sol['mean_speedup_vs_reference'])} | {vs or '—'} | "
                    f"{_fmt(sol['mean_roofline_fraction'], '.2f')} / {_fmt(sol['min_roofline_fraction'], '.2f')} |")
    return "\n".join(lines)


def regime_table(paths: Iterable[Path]) -> str:
    lines = ["| record | definition | solution | regime | workloads | latency µs | achieved TB/s | "
             "achieved TFLOP/s | × reference |", "|---|---|---|---|---|---|---|---|---|"]
    for path in paths:
        summary = _load(path)
        record = _record_name(path)
        for name, d in summary["definitions"].items():
            for sol in d["solutions"].values():
                for regime, st in (sol.get("regime_stats") or {}).items():
                    lines.append(
                        f"| {record} | {_short_name(name)} | {sol['label']} | {regime} | {st['workloads']} | "
                        f"{_fmt(st['latency_us'])} | {_fmt(st['achieved_TBps'], '.2f')} | "
                        f"{_fmt(st['achieved_TFLOPs'], '.1f')} | {_ratio(st['speedup_vs_reference'])} |")
    return "\n".join(lines)


def _definition_matches(name: str, definition: str) -> bool:
    """``name`` (a summary's definition) is ``definition``: its full name or CLI alias, with or
    without the ``__quick`` suffix on either side, or for a name no built-in has, a part of it."""
    from kernelwright import definitions

    try:
        return definitions.base_name(name) == definitions.resolve(definitions.base_name(definition)).name
    except definitions.UnknownDefinition:
        return definition in name


def _shipped_name(definition: str) -> str:
    from kernelwright import definitions
    from kernelwright.solutions import shipped_solutions

    found = shipped_solutions(definitions.resolve(definitions.base_name(definition)).name)
    if len(found) != 1:
        raise ValueError(f"{definition}: {len(found)} shipped solutions; name the one the ratios are taken to "
                         "with --ours")
    return found[0].name


def workload_table(paths: Iterable[Path], definition: str, ours: Optional[str] = None) -> str:
    """The per-workload table (module docstring) of ``definition`` over the summaries ``paths``;
    ``ours`` (a solution name) defaults to the definition's shipped solution.  The floor column is
    the floor of the run that holds ours (at small T it follows that run's routing draws).

    Raises:
        ValueError: no summary holds ``ours`` for that definition, or ``ours`` is not given and the
            definition has no single shipped solution.
    """
    ours = ours or _shipped_name(definition)
    merged, floors, axes = {}, {}, {}
    for path in paths:
        for name, d in _load(path)["definitions"].items():
            if not _definition_matches(name, definition):
                continue
            for w in d["workloads"]:
                merged.setdefault(w["uuid"], {}).update(w["latency_us"])
                if ours in w["latency_us"]:
                    floors[w["uuid"]] = w.get("floor_us")
                axes[w["uuid"]] = w["axes"]
    if not any(ours in row for row in merged.values()):
        raise ValueError(f"no summary given holds {ours} on {definition}")
    others = sorted({k for row in merged.values() for k in row} - {ours})
    head = ["workload", "axes", f"{ours} µs", "floor µs", "floor / ours"]
    for o in others:
        head += [f"{o} µs", f"{o} / ours"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    cols = {k: [] for k in ["floor"] + others}
    for uuid in sorted(merged, key=lambda u: (list(axes[u].values()), u)):
        row = merged[uuid]
        mine = row.get(ours)
        cells = [uuid, ", ".join(f"{k}={v}" for k, v in axes[uuid].items()), f"{mine:.1f}" if mine else "—"]
        floor = floors.get(uuid)
        if mine and floor:
            cols["floor"].append(floor / mine)
        cells += [f"{floor:.1f}" if floor else "—", f"{floor / mine:.2f}" if mine and floor else "—"]
        for o in others:
            v = row.get(o)
            if v and mine:
                cols[o].append(v / mine)
            cells += [f"{v:.1f}" if v else "—", f"{v / mine:.2f}" if v and mine else "—"]
        lines.append("| " + " | ".join(cells) + " |")

    def mean_cell(values):
        return f"**{statistics.mean(values):.2f}** (min {min(values):.2f})" if values else "—"

    mean = ["**mean**", "", "", "", mean_cell(cols["floor"])]
    for o in others:
        mean += ["", mean_cell(cols[o])]
    lines.append("| " + " | ".join(mean) + " |")
    return "\n".join(lines)


def summary_paths(results: List[Path]) -> List[Path]:
    """``summary.json`` of each results folder (or the file itself when given one).

    Raises:
        FileNotFoundError: a path is neither a summary file nor a folder holding one.
    """
    out = []
    for r in results:
        r = Path(r)
        path = r if r.is_file() else r / "summary.json"
        if not path.is_file():
            raise FileNotFoundError(f"{r}: no summary.json (run kernelwright bench or eval first)")
        out.append(path)
    return out
