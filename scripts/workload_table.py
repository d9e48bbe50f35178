"""Print a per-workload Markdown table from one or more bench summaries of the same definition
(e.g. ours and the baselines run as two `kernelwright bench` calls on the same workloads).

    python scripts/workload_table.py DEFINITION_ALIAS OURS_LABEL summary.json [summary.json ...]

Columns: workload, T, our latency (µs), floor (µs, from the summary that holds ours: at small T
the floor follows the run's routing draws), floor / latency, then for every other
candidate its latency and the ratio other / ours (> 1: ours is faster).  The last row holds the
means over the workloads every column has.  Every number comes from the summaries.
"""

import json
import statistics
import sys


def main(alias: str, ours: str, paths) -> None:
    merged, floors, axes = {}, {}, {}
    for path in paths:
        for name, d in json.load(open(path))["definitions"].items():
            if alias not in name:
                continue
            for w in d["workloads"]:
                merged.setdefault(w["uuid"], {}).update(w["latency_us"])
                if ours in w["latency_us"]:   # the floor of OUR run (it follows that run's routing draws)
                    floors[w["uuid"]] = w.get("floor_us")
                axes[w["uuid"]] = w["axes"]
    others = sorted({k for row in merged.values() for k in row} - {ours})
    head = ["workload", "axes", f"{ours} µs", "floor µs", "floor / ours"]
    for o in others:
        head += [f"{o} µs", f"{o} / ours"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
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
        print("| " + " | ".join(cells) + " |")
    mean = ["**mean**", "", "", "", f"**{statistics.mean(cols['floor']):.2f}** (min {min(cols['floor']):.2f})"
            if cols["floor"] else "—"]
    for o in others:
        mean += ["", f"**{statistics.mean(cols[o]):.2f}** (min {min(cols[o]):.2f})" if cols[o] else "—"]
    print("| " + " | ".join(mean) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
