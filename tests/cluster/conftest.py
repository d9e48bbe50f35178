"""The sequential reference run shared by the pool and Ray tests (computed once per session)."""

from __future__ import annotations

import pytest

from tests.cluster import cluster_helpers as H


@pytest.fixture(scope="session")
def parity_plan():
    """demo (quick, 3 workloads) x [correct Triton, numerically wrong Triton, syntax error]."""
    return [H.plan([H.good(), H.wrong(), H.broken()])]


@pytest.fixture(scope="session")
def sequential(parity_plan, tmp_path_factory):
    from kernelwright.gate.bench import run_bench

    return run_bench(parity_plan, H.quick_config(), tmp_path_factory.mktemp("sequential"))
