"""Print the README's results table (Markdown) from committed bench summaries.

    python scripts/results_table.py results/h200/<run>/.../summary.json ...
    python scripts/results_table.py --regimes summary.json ...   # per regime: latency, TB/s, TFLOP/s, × reference

With --regimes, a summary written before ``regime_stats`` existed is rebuilt in memory from the
traces beside it (``kernelwright.report.summary.with_regime_stats``); the file is left as it is.

Every number comes from the summary files (written by `kernelwright bench`); nothing is typed by hand.
"""

import json
import sys


def fmt(x, spec=".1f", unit=""):
    return "—" if x is None else f"{x:{spec}}{unit}"


def short_name(name: str) -> str:
    """The CLI's alias of a definition (`kernelwright defs`), else its first word(s)."""
    try:
        from kernelwright.definitions import resolve

        return resolve(name).short
    except Exception:
        return name.split("_")[0] if not name.startswith("dsa") else "_".join(name.split("_")[:2])


def regime_table(paths):
    """Per solution and regime (summaries written with ``regime_stats``): workloads, mean latency,
    achieved HBM bandwidth and FLOP rate (from each trace's roofline notes), × the PyTorch reference."""
    print("| record | definition | solution | regime | workloads | latency µs | achieved TB/s | achieved TFLOP/s | × reference |")
    print("|---|---|---|---|---|---|---|---|---|")
    from pathlib import Path

    from kernelwright.report.summary import with_regime_stats

    for path in paths:
        s = with_regime_stats(json.load(open(path)), Path(path).parent)
        record = "/".join(path.replace("\\", "/").split("/")[-3:-1])
        for name, d in s["definitions"].items():
            for sol in d["solutions"].values():
                for regime, st in (sol.get("regime_stats") or {}).items():
                    print(f"| {record} | {short_name(name)} | {sol['label']} | {regime} | {st['workloads']} | "
                          f"{fmt(st['latency_us'])} | {fmt(st['achieved_TBps'], '.2f')} | "
                          f"{fmt(st['achieved_TFLOPs'], '.1f')} | {fmt(st['speedup_vs_reference'], '.1f', '×')} |")


def main(paths):
    if paths and paths[0] == "--regimes" and len(paths) > 1:
        return regime_table(paths[1:])
    if not paths or any(p.startswith("-") for p in paths):
        sys.exit(__doc__)
    print("| record | definition | solution | passed | mean latency µs (per regime) | graph µs | × reference | × baselines (mean over common workloads) | roofline mean / min |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        s = json.load(open(path))
        record = "/".join(path.replace("\\", "/").split("/")[-3:-1])
        for name, d in s["definitions"].items():
            labels = {k: v["label"] for k, v in d["solutions"].items()}
            labels.update(d.get("lower_bounds", {}))
            for sol in d["solutions"].values():
                regimes = "; ".join(f"{r}: {v:.0f}" for r, v in sol["regime_latency_us"].items())
                vs = "; ".join(f"`{k}`: {v['mean_speedup']:.2f}×" for k, v in sol["speedup_vs"].items())
                short = short_name(name)
                print(f"| {record} | {short} | {sol['label']} | {sol['passed']}/{sol['workloads']} | "
                      f"{fmt(sol['mean_latency_us'])} ({regimes}) | {fmt(sol['mean_graph_latency_us'])} | "
                      f"{fmt(sol['mean_speedup_vs_reference'], '.1f', '×')} | {vs or '—'} | "
                      f"{fmt(sol['mean_roofline_fraction'], '.2f')} / {fmt(sol['min_roofline_fraction'], '.2f')} |")


if __name__ == "__main__":
    main(sys.argv[1:])
