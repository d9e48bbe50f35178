"""Terminal tables (rich) for a bench summary: one table per definition, one row per solution."""

from __future__ import annotations

from typing import Any, Dict, Optional

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _fmt(x: Optional[float], spec: str = ".1f", suffix: str = "") -> str:
    return "—" if x is None else f"{x:{spec}}{suffix}"


def render_summary(summary: Dict[str, Any], console: Optional[Console] = None) -> None:
    console = console or Console()
    for def_name, d in summary["definitions"].items():
        regimes = d["regimes"]
        sols = d["solutions"]
        baselines = [s for s, v in sols.items() if v["role"] == "baseline"]
        lower = list(d.get("lower_bounds", {}))
        table = Table(title=def_name, title_justify="left", show_lines=False)
        table.add_column("solution", no_wrap=True)
        table.add_column("passed", justify="right")
        table.add_column("mean µs", justify="right")
        for r in regimes:
            table.add_column(f"{r} µs", justify="right")
        table.add_column("× reference", justify="right")
        for b in baselines + lower:
            label = sols[b]["label"] if b in sols else d["lower_bounds"].get(b, b)
            table.add_column(f"× {label}", justify="right")
        table.add_column("roofline mean/min", justify="right")
        for name, s in sols.items():
            passed = f"{s['passed']}/{s['workloads']}" + (f" ({s['suspicious']} susp.)" if s["suspicious"] else "")
            style = None if s["all_passed"] else "red"
            cells = [s["label"], passed, _fmt(s["mean_latency_us"])]
            cells += [_fmt(s["regime_latency_us"].get(r)) for r in regimes]
            ref = s["mean_speedup_vs_reference"]
            cells.append(_fmt(ref, ".2g" if ref is not None and ref < 1 else ".1f", "×"))   # CPU: 0.03×, not 0.0×
            for b in baselines + lower:
                v = s["speedup_vs"].get(b)
                cells.append("—" if v is None else f"{v['mean_speedup']:.2f}×")
            frac = s["mean_roofline_fraction"]
            cells.append("—" if frac is None else f"{frac:.2f} / {s['min_roofline_fraction']:.2f}")
            table.add_row(*cells, style=style)
        console.print(table)
        for name, s in sols.items():
            for f in s["failures"][:5]:
                detail = f" — {escape(f['detail'])}" if f.get("detail") else ""
                console.print(f"  [red]{escape(s['label'])}[/red] {_short_id(f['workload'])}: {f['status']} "
                              f"{','.join(f['reasons'])}{detail}")


def _short_id(workload: str) -> str:
    """A random UUID's first 8 hex digits (enough to tell the contest workloads apart; `-w` takes
    prefixes); any other workload name (demo-rmsnorm-t7, sweep-moe-t1-o224) whole."""
    is_uuid = len(workload) == 36 and workload.count("-") == 4
    return workload[:8] if is_uuid else workload
