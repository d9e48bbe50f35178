"""Upstream's own loader for round-trip tests: flashinfer-bench's ``TraceSet.from_path``.

flashinfer-bench (0.1.2 on PyPI) is not a dependency: it pulls flashinfer-python and CUDA wheels.
It is found in this interpreter, or in ``$KW_FLASHINFER_BENCH_PATH`` (a private install:
``pip install --no-deps --target DIR flashinfer-bench==0.1.2 docstring-parser``); tests that need it
skip with a reason otherwise.  It runs in a subprocess, so its import-time side effects stay out
of the test process.
"""

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

_LOAD = r"""
import json, sys
from flashinfer_bench.data import TraceSet
ts = TraceSet.from_path(sys.argv[1])
print(json.dumps({
    "definitions": sorted(ts.definitions),
    "solutions": {d: sorted(s.name for s in sols) for d, sols in ts.solutions.items()},
    "workloads": {d: len(w) for d, w in ts.workloads.items()},
    "traces": {d: [t.model_dump(mode="json") for t in items] for d, items in ts.traces.items()},
}))
"""


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    extra = os.environ.get("KW_FLASHINFER_BENCH_PATH")
    if extra:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra, env.get("PYTHONPATH")) if p)
    return env


@functools.lru_cache(maxsize=1)
def available() -> bool:
    res = subprocess.run([sys.executable, "-c", "import flashinfer_bench.data"], env=_env(), capture_output=True)
    return res.returncode == 0


def require_upstream() -> None:
    if not available():
        pytest.skip("flashinfer-bench is not installed (set KW_FLASHINFER_BENCH_PATH to a private install)")


def load_with_upstream(root: Path) -> Dict[str, Any]:
    """What flashinfer-bench's ``TraceSet.from_path(root)`` holds: definition names, solution
    names per definition, workload counts, and every trace as upstream dumps it again (its
    models: kernelwright's own fields are gone)."""
    require_upstream()
    res = subprocess.run([sys.executable, "-c", _LOAD, str(root)], env=_env(), capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])
