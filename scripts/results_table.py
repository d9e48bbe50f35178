"""Print the README's results table (Markdown) from committed bench summaries.

    python scripts/results_table.py results/h200/<run>/.../summary.json ...

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


def main(paths):
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
