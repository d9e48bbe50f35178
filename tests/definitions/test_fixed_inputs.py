"""Safetensors (fixed) workload inputs (issue 21, item 2): loaded from the blob under the TraceSet
root, checked against the definition, the same tensor in every trial and timed iteration (the
twin never changes one), pinned by digest; a missing blob or key is one line and one non-PASSED
trace, found in the parent before any worker is asked."""

import pytest
import torch
from safetensors.torch import save_file

from kernelwright import definitions
from kernelwright.definitions import fixed
from kernelwright.gate import fresh
from kernelwright.gate.evaluate import GateConfig, SolutionRun, WorkloadContext, evaluate
from kernelwright.gate.session import WorkerSession
from kernelwright.inputs import make_generator
from kernelwright.solutions import shipped_solutions
from kernelwright.trace import EvaluationStatus, RandomInput, SafetensorsInput, ScalarInput, Workload

CPU = torch.device("cpu")
DEMO = definitions.get("demo").quick_variant()


def _workload(path="blob/demo/x.safetensors", key="x", tokens=3, uuid="fixed-x"):
    return Workload(uuid=uuid, axes={"num_tokens": tokens},
                    inputs={"x": SafetensorsInput(path=path, tensor_key=key), "weight": RandomInput(),
                            "eps": ScalarInput(value=1e-6)})


@pytest.fixture
def root(tmp_path):
    (tmp_path / "blob" / "demo").mkdir(parents=True)
    save_file({"x": torch.randn(3, 512).bfloat16(), "other": torch.zeros(2)}, str(tmp_path / "blob/demo/x.safetensors"))
    return tmp_path


def _draw(builtin, workload, seed):
    return builtin.make_inputs(builtin.definition, workload, make_generator(seed, CPU), CPU)


def test_fixed_inputs_are_the_file_s_tensor_whatever_the_seed(root):
    b = fixed.with_fixed_inputs(DEMO, root)
    w = fixed.pin_workloads([_workload()], root)[0]
    assert w.inputs["x"].sha256 and len(w.inputs["x"].sha256) == 64
    one, two = _draw(b, w, 1), _draw(b, w, 2)
    assert torch.equal(one["x"], two["x"]) and not torch.equal(one["weight"], two["weight"])
    one["x"].add_(1)                                     # callers get copies: the next draw is unchanged
    assert torch.equal(_draw(b, w, 3)["x"], two["x"])
    again = definitions.resolve(b.locator)               # the worker's copy: same inputs
    assert again.locator == b.locator and torch.equal(_draw(again, w, 1)["x"], two["x"])
    assert b.blob_root == str(root.resolve()) and b.origin == "builtin"


@pytest.mark.parametrize("workload, words", [
    (_workload(path="blob/demo/missing.safetensors"), ["missing.safetensors", "not found"]),
    (_workload(key="nope"), ["no tensor 'nope'", "other, x"]),
    (_workload(tokens=4), ["shape [3, 512]", "wants [4, 512]"]),
    (_workload(key="other"), ["shape [2]"]),
])
def test_each_problem_is_one_line_naming_the_file(root, workload, words):
    b = fixed.with_fixed_inputs(DEMO, root)
    with pytest.raises(fixed.WorkloadInputError) as exc:
        _draw(b, workload, 1)
    message = str(exc.value)
    assert "\n" not in message and "workload fixed-x" in message
    for word in words:
        assert word in message, message


def test_a_git_lfs_pointer_says_so(root):
    (root / "blob/demo/lfs.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:ab\n")
    with pytest.raises(fixed.WorkloadInputError, match="a Git LFS pointer, not the file: run git lfs pull"):
        _draw(fixed.with_fixed_inputs(DEMO, root), _workload(path="blob/demo/lfs.safetensors"), 1)


def test_a_blob_changed_after_pinning_is_refused(root):
    w = fixed.pin_workloads([_workload()], root)[0]
    save_file({"x": torch.zeros(3, 512).bfloat16()}, str(root / "blob/demo/x.safetensors"))   # an easier problem
    with pytest.raises(fixed.WorkloadInputError, match="changed since the run pinned it"):
        _draw(fixed.with_fixed_inputs(DEMO, root), w, 1)


def test_the_twin_never_changes_a_fixed_input(root):
    meta = [("x", [3, 512], "bfloat16"), ("weight", [512], "bfloat16"), ("eps", None, "float32")]
    assert fresh.twin_target(meta) == ("x", 1536)
    assert fresh.twin_target(meta, fixed=["x"]) == ("weight", 512)
    assert fresh.twin_target(meta, fixed=["x", "weight"]) is None
    b = fixed.with_fixed_inputs(DEMO, root)
    w = fixed.pin_workloads([_workload()], root)[0]
    ctx = WorkloadContext(b, w, GateConfig.preset("cpu", quick=True))
    twins = [s for specs in ctx.timing_specs for s in specs if not isinstance(s, int)]
    assert twins and all(spec[2] == "weight" for spec in twins)
    for spec in twins:
        expanded, source = fresh.expand(b, w, spec, CPU), fresh.expand(b, w, spec[0], CPU)
        assert torch.equal(expanded["x"], source["x"]) and not torch.equal(expanded["weight"], source["weight"])
    assert "x fixed by the workload" in ctx.fresh_note()


def test_a_workload_with_a_missing_blob_fails_in_the_parent_without_a_worker(root):
    b = fixed.with_fixed_inputs(DEMO, root)
    sol = shipped_solutions("demo_rmsnorm_h512")[0]
    session = WorkerSession(sol, "cpu", log_dir=root / "logs", protect=[])
    ctx = WorkloadContext(b, _workload(path="blob/demo/missing.safetensors"), GateConfig.preset("cpu", quick=True))
    trace = evaluate(SolutionRun(session), ctx)
    assert session.proc is None                                       # no worker was started
    ev = trace.evaluation
    assert ev.status == EvaluationStatus.RUNTIME_ERROR and ev.gate.reasons == ["WORKLOAD_INPUT"]
    assert "missing.safetensors" in ev.gate.detail and "\n" not in ev.gate.detail
    assert ev.log.startswith("[kernelwright] ") and "missing.safetensors" in ev.log


def test_data_files_name_the_definition_file_and_the_blobs(root, tmp_path):
    b = fixed.with_fixed_inputs(DEMO, root)
    files = definitions.data_files(b, [_workload()])
    assert files == [str((root / "blob/demo/x.safetensors").resolve())]
