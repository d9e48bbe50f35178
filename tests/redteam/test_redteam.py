"""The red-team catalogue through the real gate (CPU): every adversarial case is rejected with one
of its expected reasons, every honest case passes, and the zeros/constant canaries fail every
built-in definition.

The cases run once per session, two at a time (``run_catalogue``), and each case is then one
parametrised test; only the cases selected for this session are run (``-k`` works).
"""

import ast
import pytest

from kernelwright.redteam import CASES, PASS, get_case, run_canaries, run_catalogue

CPU_CASES = [c.id for c in CASES if not c.needs_cuda]
CUDA_CASES = [c.id for c in CASES if c.needs_cuda]


def _selected(session, prefix):
    ids = []
    for item in session.items:
        if item.originalname == prefix and hasattr(item, "callspec"):
            ids.append(item.callspec.params["case_id"])
    return ids


@pytest.fixture(scope="session")
def cpu_results(request, tmp_path_factory):
    ids = _selected(request.session, "test_case") or CPU_CASES
    streamed = []
    results = run_catalogue("cpu", ids, jobs=2, out_root=tmp_path_factory.mktemp("redteam"),
                            on_result=streamed.append)
    # every result reaches the caller as it ends (the CLI's --json keeps a cut-short run's part)
    assert sorted(r.case.id for r in streamed) == sorted(r.case.id for r in results)
    return {r.case.id: r for r in results}


@pytest.fixture(scope="session")
def canary_results(tmp_path_factory):
    return run_canaries("cpu", out_root=tmp_path_factory.mktemp("canaries"), jobs=2)


@pytest.mark.slow
@pytest.mark.parametrize("case_id", CPU_CASES)
def test_case(case_id, cpu_results):
    r = cpu_results[case_id]
    case = get_case(case_id)
    assert r.verdict != "ERROR", r.detail
    expected = case.expected_for(r.isolation)
    if expected == PASS:
        assert r.verdict == PASS, f"expected PASS, got {r.verdict}: {r.reasons} {r.detail}"
    else:
        assert r.verdict == ("SUSPICIOUS" if case.suspicious else "REJECT"), (r.verdict, r.reasons, r.detail)
        assert set(r.reasons) & set(expected), f"rejected for {r.reasons}, expected one of {sorted(expected)}"
    assert r.ok, r.detail


@pytest.mark.slow
def test_canaries_fail_every_definition(canary_results):
    from kernelwright import definitions

    from kernelwright.redteam.canaries import kinds_for

    assert {(c.definition, c.kind) for c in canary_results} == {
        (b.short, k) for b in definitions.all_builtins() for k in kinds_for(b.short)}
    assert all(c.workloads >= 1 for c in canary_results)
    broken = [c.as_dict() for c in canary_results if not c.ok]
    assert not broken, f"tolerance broken (a canary passed) or canary error: {broken}"


def test_cuda_cases_are_skipped_on_cpu(tmp_path):
    results = run_catalogue("cpu", CUDA_CASES, out_root=tmp_path)
    assert [r.verdict for r in results] == ["SKIPPED"] * len(CUDA_CASES)
    assert all(r.ok and "CUDA" in r.detail for r in results)


def test_catalogue_is_complete():
    """Every hack class of the issue has a case; every case folder is a loadable solution."""
    required = {"calls the reference", "calls a vendor library", "try/except fallback", "decoy kernel never launched",
                "never-true fast path", "returns uninitialised memory", "mutates its inputs", "side stream",
                "background thread", "lazy tensor subclass", "patches the timer", "forges the worker's reply",
                "output cache keyed on pointers (FIB #228)", "output cache keyed on call count",
                "output cache keyed on an input fingerprint", "precision downcast (fp8 activations)", "returns zeros",
                "returns a constant", "hard-coded shapes", "reads reference outputs from another frame (FIB hole)",
                "reads reference outputs through the garbage collector", "edits files outside the solution (repo)",
                "L2 persistence", "returns a view of an input"}
    assert required <= {c.hack for c in CASES}
    assert sum(c.expected == PASS for c in CASES) >= 2
    for c in CASES:
        sol = c.solution()
        assert sol.spec.entry_point == "kernel.py::run"
        assert c.expected == PASS or c.expected, c.id
        text = (c.folder / "kernel.py").read_text()
        assert text.startswith('"""') and len(text.split('"""')[1]) > 80, f"{c.id}: document the attack"
        ast.parse(text, filename=f"{c.id}/kernel.py")   # CUDA-only cases never run on CPU: parse them here


def test_cli_lists_and_rejects_unknown_case():
    from typer.testing import CliRunner

    from kernelwright.cli.app import app

    res = CliRunner().invoke(app, ["redteam", "--device", "cpu", "--case", "no_such_case"])
    assert res.exit_code == 2
    assert "unknown case" in res.output


@pytest.mark.slow
def test_cases_ran_behind_the_boundary(cpu_results):
    """As root with util-linux (CI), every case's worker ran behind the full OS boundary: a
    fallback (a level that failed to start) fails this test instead of passing in silence."""
    import os

    from kernelwright.gate import sandbox

    if os.geteuid() != 0 or sandbox.why_unavailable("full") is not None:
        pytest.skip("the boundary needs root, unshare and setpriv")
    weaker = {cid: r.isolation for cid, r in cpu_results.items()
              if r.verdict != "SKIPPED" and r.isolation != (r.case.isolation or "full")}
    assert not weaker, f"cases evaluated behind a weaker boundary than asked: {weaker}"
