"""Builds a copy of the shipped MoE solution with some config-table entries changed, under a new
solution name, so that the gate can time it side by side with the shipped one in ONE bench run
(same lease, same routing draws, candidates interleaved per workload):

    python scripts/moe_ab_folder.py /tmp/moe-k512 --name moe_k512 --set 256:G1_BLOCK_K=512,G1_STAGES=3
    kernelwright bench -d moe -s /tmp/moe-k512            # the shipped solution runs too

``--set MAX_T:KEY=VALUE,...`` (repeatable) updates the table entry whose max T is MAX_T
("None" for the last entry) in the copy's configs.py; values are Python literals.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import sys
from pathlib import Path

from moe_variants import apply_table, read_table

SHIPPED = Path(__file__).resolve().parents[1] / "src" / "kernelwright" / "solutions" / "moe_fp8_triton"


def parse_set(text: str) -> tuple[int | None, dict]:
    """'256:G1_BLOCK_K=512,G1_STAGES=3' -> (256, {'G1_BLOCK_K': 512, 'G1_STAGES': 3})."""
    head, _, body = text.partition(":")
    if not body:
        raise ValueError(f"--set {text!r}: expected MAX_T:KEY=VALUE,...")
    max_t = None if head.strip() == "None" else int(head)
    changes = {}
    for item in body.split(","):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--set {text!r}: {item!r} is not KEY=VALUE")
        try:
            changes[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"--set {text!r}: {value.strip()!r} is not a Python literal") from None
    return max_t, changes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="folder to write (replaced if it exists)")
    ap.add_argument("--name", required=True, help="solution name of the copy")
    ap.add_argument("--set", action="append", default=[], metavar="MAX_T:KEY=VALUE,...")
    args = ap.parse_args()
    try:
        sets = [parse_set(s) for s in args.set]
    except (ValueError, SyntaxError) as exc:
        sys.exit(f"error: {exc}")
    unknown_keys = sorted({k for _, changes in sets for k in changes} - _config_keys())
    if unknown_keys:
        sys.exit(f"error: unknown config key(s) {unknown_keys}; kernel.py reads {sorted(_config_keys())}")
    known = set(_table_max_ts())
    missing = [t for t, _ in sets if t not in known]
    if missing:
        sys.exit(f"error: no table entry with max T {missing}; entries: {sorted(known, key=str)}")
    if args.out.exists():
        shutil.rmtree(args.out)
    shutil.copytree(SHIPPED, args.out, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = json.loads((args.out / "manifest.json").read_text())
    manifest["name"] = args.name
    manifest["description"] = f"A/B copy of {SHIPPED.name} (scripts/moe_ab_folder.py): {'; '.join(args.set)}"
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    table = tuple((max_t, dict(cfg, **{k: v for mt, s in sets if mt == max_t for k, v in s.items()}))
                  for max_t, cfg in _table())
    apply_table(args.out / "configs.py", table)
    print(json.dumps({"name": args.name, "sets": [[t, s] for t, s in sets]}))


def _config_keys() -> set:
    """Every config key kernel.py reads (``cfg["KEY"]`` or ``cfg.get("KEY"``): run() ignores
    unknown keys, so a misspelt --set would otherwise measure the shipped config twice."""
    text = (SHIPPED / "kernel.py").read_text()
    return set(re.findall(r'cfg(?:\.get\(|\[)"([A-Z0-9_]+)"', text)) | set(    # + _persistent_grid's key
        re.findall(r'_persistent_grid\([^)]*"([A-Z0-9_]+)"\)', text))


def _table() -> tuple:
    """The shipped table (configs.py is data: run, without importing Triton)."""
    return read_table(SHIPPED / "configs.py")


def _table_max_ts() -> list:
    return [max_t for max_t, _ in _table()]


if __name__ == "__main__":
    main()
