"""Static scan, kernel provenance (GPU names and the CPU/Triton rule), protected-file snapshots,
reason codes."""

import importlib.util
import os
import time

import pytest
import torch

import kernelwright
from kernelwright.gate import guards


def _codes(text, path="kernel.py"):
    return {f.code for f in guards.static_scan({path: text})}


def test_static_scan_flags_known_patterns():
    assert "FRAME_INTROSPECTION" in _codes("import sys\nf = sys._getframe(1)\n")
    assert "GC_INTROSPECTION" in _codes("import gc\nobjs = gc.get_objects()\n")
    assert "THREADING" in _codes("import threading\n")
    assert "PROCESSES" in _codes("import subprocess\n")
    assert "IMPORTS_GATE" in _codes("from kernelwright.definitions import demo_rmsnorm\n")
    assert "TORCH_MATMUL" in _codes("def run(a, b):\n    return torch.matmul(a, b)\n")
    assert "SIDE_STREAM" in _codes("s = torch.cuda.Stream()\n")
    assert "L2_PERSISTENCE" in _codes("attr.accessPolicyWindow = w\n")
    assert "MONKEYPATCH" in _codes("import time\ntime.perf_counter = lambda: 0.0\n")
    assert "MONKEYPATCH" in _codes("setattr(torch.cuda.Event, 'elapsed_time', f)\n")
    assert "IDENTITY_KEYS" in _codes("key = x.data_ptr()\n")
    assert "VENDOR_LIBRARY" in _codes("import flashinfer\n")


def test_static_scan_ignores_comments_and_docstrings_and_is_advisory():
    text = '"""Never call sys._getframe or gc.get_objects here."""\n# threading is not used\nimport torch\n'
    assert _codes(text) == set()
    # findings are (code, message) warnings, one per code, with a location
    found = guards.static_scan({"kernel.py": "import gc\ngc.get_objects()\ngc.get_objects()\n"})
    assert len(found) == 1 and found[0].message.startswith("kernel.py:2")


def test_torch_matmul_only_flagged_in_python():
    assert "TORCH_MATMUL" not in _codes("torch.matmul(a, b);", path="k.cu")


def test_classify_kernel():
    assert guards.classify_kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64") == "vendor"
    assert guards.classify_kernel("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN") == "vendor"
    assert guards.classify_kernel("void at::native::vectorized_elementwise_kernel<4, ...>") == "torch"
    assert guards.classify_kernel("_rmsnorm_rows") == "solution"
    assert guards.classify_kernel("triton::_rmsnorm_rows") == "solution"
    assert guards.classify_kernel("torch::mul") == "torch"
    # a solution's own kernel whose name looks like a vendor's is still the solution's
    assert guards.classify_kernel("fused_gemv_splitk_kernel") == "vendor"
    assert guards.classify_kernel("fused_gemv_splitk_kernel", ["fused_gemv_splitk_kernel"]) == "solution"
    assert guards.classify_kernel("void fused_gemv_splitk_kernel<128>(float*)", ["fused_gemv_splitk_kernel"]) == "solution"


def test_own_kernel_names():
    py = ("import triton\n@triton.jit\ndef _a(x):\n    pass\n\n@triton.autotune(configs=[], key=[])\n@triton.jit\n"
          "def _bbb(x):\n    pass\n\ndef helper():\n    pass\n")
    cu = "__global__ void __launch_bounds__(256) scale_kernel(float* x) {}\ntemplate <int N>\n__global__ void topk_k(int* y) {}\n"
    assert guards.own_kernel_names({"k.py": py, "k.cu": cu}) == ["_bbb", "scale_kernel", "topk_k"]


def test_gpu_provenance():
    own = {"_rmsnorm_rows": [10, 50.0]}
    assert guards.provenance_verdict(own)[0] is None
    assert guards.provenance_verdict({"void at::native::reduce_kernel<...>": [10, 50.0]})[0] == guards.NO_KERNELS
    mixed = {"_copy": [10, 5.0], "sm90_xmma_gemm_f32": [10, 80.0], "at::native::elementwise_kernel": [3, 10.0]}
    assert guards.provenance_verdict(mixed)[0] == guards.VENDOR_KERNELS
    mostly_own = {"_attn_fwd": [10, 90.0], "at::native::fill_kernel": [1, 10.0]}
    assert guards.provenance_verdict(mostly_own)[0] is None
    assert guards.provenance_verdict({}, cpu_ops=True)[0] is None
    assert guards.provenance_verdict({"aten::mm": [1, 5.0]}, cpu_ops=True)[0] == guards.VENDOR_KERNELS


def test_cpu_provenance_rule():
    launches = {"triton::_rmsnorm_rows": [1, 1000.0]}
    glue = {"torch::empty_like": [1, 1.0, 512], "torch::shape__get__": [2, 0.1, 0], "torch::view": [1, 0.1, 512]}
    assert guards.cpu_provenance_verdict(launches, glue, 512, 1)[0] is None
    # a call without a Triton launch
    assert guards.cpu_provenance_verdict(launches, glue, 512, 0)[0] == guards.NO_KERNELS
    assert guards.cpu_provenance_verdict({}, glue, 512, 1)[0] == guards.NO_KERNELS
    # the host computes (the reference's ops) and a Triton kernel only copies
    ref_ops = {"torch::pow": [1, 5.0, 512], "torch::mean": [1, 5.0, 512], "torch::rsqrt": [1, 2.0, 1]}
    assert guards.cpu_provenance_verdict(launches, ref_ops, 512, 1)[0] == guards.VENDOR_KERNELS
    # always-compute ops, whatever their size
    assert guards.cpu_provenance_verdict(launches, {"torch::topk": [1, 1.0, 8]}, 10_000, 1)[0] == guards.VENDOR_KERNELS
    # small host bookkeeping (e.g. a max over seq_lens) is fine
    assert guards.cpu_provenance_verdict(launches, {"torch::max": [1, 1.0, 4]}, 4096, 1)[0] is None


def test_op_name():
    import torch

    assert guards.op_name(torch.Tensor.__mul__) == "mul"
    assert guards.op_name(torch.Tensor.__rmatmul__) == "matmul"
    assert guards.op_name(torch.rsqrt) == "rsqrt"


def test_host_op_name_python_functions_are_compute():
    import copy
    import functools

    import torch

    compute = guards._TORCH_CPU_COMPUTE.match
    # Python code runs while the recorder's mode is off: compute, whatever its name
    for func in (torch.autograd.grad, torch.Tensor.__deepcopy__, functools.partial(copy.copy), lambda: 0,
                 type("Device", (), {})):
        assert compute(guards.host_op_name(func)), func
    assert guards.host_op_name(torch.autograd.grad) == "torch::python_function.grad"
    # torch's C functions, its Python glue and operators keep their names, and their rules
    for func, name in ((torch.add, "torch::add"), (torch.Tensor.add, "torch::add"), (torch.Tensor.split, "torch::split"),
                       (torch.Tensor.__format__, "torch::format"), (torch.Tensor.__len__, "torch::len"),
                       (torch.Tensor.__floordiv__, "torch::floordiv"), (torch.Tensor.__rsub__, "torch::sub"),
                       (torch._C.TensorBase.shape.__get__, "torch::shape__get__"), (torch.Tensor.backward, "torch::backward"),
                       (torch.ops.aten.mm.default, "torch::mm.default"), (torch.device, "torch::device")):
        assert guards.host_op_name(func) == name, func


def test_file_snapshot_sees_edits_that_restore_mtime(tmp_path):
    f = tmp_path / "reference.py"
    f.write_text("x = 1\n")
    log = tmp_path / "own.log"
    log.write_text("")
    before = guards.snapshot_files([str(tmp_path)], exclude=[str(log)])
    log.write_text("worker output is not a change\n")
    assert guards.changed_files(before, guards.snapshot_files([str(tmp_path)], exclude=[str(log)])) == []
    st = os.stat(f)
    time.sleep(0.01)
    f.write_text("x = 2\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))       # a stealthy edit: same size, same mtime
    after = guards.snapshot_files([str(tmp_path)], exclude=[str(log)])
    assert str(f) in guards.changed_files(before, after)
    (tmp_path / "planted.py").write_text("")
    assert str(tmp_path / "planted.py") in guards.changed_files(after, guards.snapshot_files([str(tmp_path)], [str(log)]))


def test_protected_roots(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE", str(tmp_path / "cache"))
    roots = guards.protected_roots(tmp_path / "results")
    pkg = os.path.dirname(os.path.abspath(kernelwright.__file__))
    assert pkg in roots          # the whole package: the gate's sources, shipped solutions, baselines
    for sub in ("gate", "definitions", "solutions", "baselines", "report"):
        assert any(os.path.join(pkg, sub).startswith(r + os.sep) for r in roots), sub
    assert str(tmp_path / "cache") in roots and str(tmp_path / "results") in roots
    # the package's bytecode is written up front, so a first import inside a watched message
    # writes no __pycache__ file there
    pyc = importlib.util.cache_from_source(os.path.join(pkg, "report", "tables.py"))
    if os.path.exists(pyc):
        os.remove(pyc)
    monkeypatch.setattr(guards, "_PRECOMPILED", [])
    guards.protected_roots(tmp_path / "results")
    assert os.path.exists(pyc)
    monkeypatch.setenv("KERNELWRIGHT_PROTECT_SOURCES", "0")
    assert guards.protected_roots(tmp_path / "results") == [str(tmp_path / "cache"), str(tmp_path / "results")]


def test_every_reason_code_is_documented():
    codes = {v for k, v in vars(guards).items() if k.isupper() and isinstance(v, str) and k == v}
    assert codes <= set(guards.REASONS), codes - set(guards.REASONS)
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "gate.md")).read()
    missing = [c for c in guards.REASONS if f"`{c}`" not in doc]
    assert not missing, f"docs/gate.md does not describe {missing}"


def test_bitwise_equal_and_overlaps():
    import torch

    a = torch.tensor([1.0, float("nan")])
    assert guards.bitwise_equal(a, a.clone())
    assert not guards.bitwise_equal(a, torch.tensor([1.0, 0.0]))
    x = torch.zeros(8)
    assert guards.overlaps(x[2:4], x) and not guards.overlaps(x, torch.zeros(8))


def test_phase_verdict_uses_the_kernel_sum_for_launch_bound_honest_calls():
    # launch-bound honest solution on the H200 (ghost_branch): CUPTI stretched the span to 2x the
    # timed latency while the kernels themselves took a few µs
    reason, _ = guards.phase_verdict([0.109, 0.110, 0.108], [0.010, 0.011, 0.010], [0.233, 0.240, 0.230])
    assert reason is None


def test_phase_verdict_flags_timed_calls_that_ran_less_work():
    reason, message = guards.phase_verdict([0.24, 0.25, 0.23], [1.9, 1.9, 1.9], [1.95, 1.96, 1.94])
    assert reason == guards.PHASE_MISMATCH
    assert "0.13x" in message and "0.2400 ms vs 1.9000 ms" in message


def test_phase_verdict_takes_the_span_for_overlapping_streams():
    # two streams overlap: the kernel sum exceeds the span, the events cover the span
    assert guards.phase_verdict([1.05, 1.04], [2.0, 2.0], [1.0, 1.0])[0] is None
    assert guards.phase_verdict([0.5, 0.5], [2.0, 2.0], [1.0, 1.0])[0] == guards.PHASE_MISMATCH
    assert guards.phase_verdict([], [], [])[0] is None
    assert guards.phase_verdict([0.1], [0.0], [0.0])[0] is None


def test_native_thread_names_sees_a_new_thread():
    import threading

    before = guards.native_thread_names()
    if not before:
        pytest.skip("no /proc/self/task here")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        after = guards.native_thread_names()
        assert len(after) == len(before) + 1
        assert t.native_id in after and t.native_id not in before
    finally:
        stop.set()
        t.join()


def test_call_threads_count_only_threads_started_during_calls(monkeypatch):
    """BACKGROUND_THREAD counts the native threads the solution's calls started that are still
    alive: a thread the worker starts between calls is not the solution's, and ended threads
    drop out (worker.Harness._note_call_threads)."""
    from types import SimpleNamespace

    from kernelwright.gate import worker

    live = {1: "python3", 2: "cuda-EvtHandlr"}
    monkeypatch.setattr(worker.guards, "native_thread_names", lambda: dict(live))
    h = SimpleNamespace(call_threads={})
    note = worker.Harness._note_call_threads

    live[3] = "python3"                      # started by the gate between calls
    before = dict(live)
    live[4] = "solution-a"                   # started during the call
    note(h, before)
    assert h.call_threads == {4: "solution-a"}
    before = dict(live)
    live[5] = "solution-b"
    live[6] = "solution-c"
    del live[4]                              # ended since
    note(h, before)
    assert h.call_threads == {5: "solution-b", 6: "solution-c"}
    before = dict(live)
    note(h, before)                          # a call that starts nothing keeps the live ones
    assert sorted(h.call_threads) == [5, 6]


def test_harness_tensor_calls_ignore_attributes_a_solution_sets():
    """The harness poisons and inspects buffers through the class's methods, and rejects buffers
    or returned tensors that carry attributes of their own (red-team cases shadow_fill,
    shadow_storage)."""
    import torch

    from kernelwright.gate.worker import SolutionError, guard_plain_tensors, poison

    y = torch.zeros(4)
    called = []
    y.fill_ = lambda value: called.append(value)          # what a solution can do to a buffer
    poison([y])
    assert not called and torch.isnan(y).all()           # the class's fill_ ran, not the hook
    y.untyped_storage = lambda: called.append("storage")
    assert guards.storage_span(y)[0] == torch.Tensor.untyped_storage(y).data_ptr() and not called
    with pytest.raises(SolutionError, match="fill_"):
        guard_plain_tensors([y], "buffer")
    guard_plain_tensors([torch.zeros(2)], "buffer")      # a plain tensor passes


def test_trial_phase_verdict_flags_a_later_trial_that_timed_less_than_ran():
    # H200, 2026-12-02, held_side_stream before the stream pin: trial 0 200 µs, trial 1 1.3 µs,
    # CUPTI saw 201 µs of kernels
    reason, message = guards.trial_phase_verdict([0.200032, 0.00128], 0.201215, 0.201215)
    assert reason == guards.PHASE_MISMATCH
    assert message.startswith("trial 1 timed 0.0013 ms")


def test_trial_phase_verdict_passes_honest_trials():
    assert guards.trial_phase_verdict([0.200, 0.190, 0.205], 0.201, 0.203)[0] is None
    # launch-bound: the span is stretched by CUPTI, the sum is the floor that counts
    assert guards.trial_phase_verdict([0.012, 0.011], 0.010, 0.230)[0] is None
    # bimodal work (MoE at T = 1, H200 2026-12-02: the DeepGEMM pipeline's trials at 0.45x of
    # the 8 traced calls' kernel time): trial 0 is the reference too
    assert guards.trial_phase_verdict([0.0292, 0.0290, 0.0295], 0.065, 0.066)[0] is None
    assert guards.trial_phase_verdict([], 0.1, 0.1)[0] is None
    assert guards.trial_phase_verdict([0.001], 0.0, 0.0)[0] is None


def test_trial_phase_verdict_threshold_is_a_quarter_of_the_reference():
    assert guards.trial_phase_verdict([0.1, 0.026], 0.2, 0.2)[0] is None
    assert guards.trial_phase_verdict([0.1, 0.024], 0.2, 0.2)[0] == guards.PHASE_MISMATCH
    # trial 0 itself is never judged here (phase_verdict pairs it with the traced calls)
    assert guards.trial_phase_verdict([0.001, 0.001], 0.2, 0.2)[0] is None


def test_held_prerelease_counts_what_started_before_the_release():
    from kernelwright.gate.timing import held_prerelease

    released = 1_000_000
    # one start after the release, one within the 3 µs exit spread, one copy 80 µs early
    assert held_prerelease([released + 100, released - 2_000], released, 3_000) == (0, 2.0)
    assert held_prerelease([released - 80_000, released + 10], released, 3_000) == (1, 80.0)
    assert held_prerelease([], released, 3_000) == (0, 0.0)


def test_phase_verdict_by_trial_judges_each_trial_against_its_own_pairs():
    honest = ([0.20, 0.21, 0.20], [0.20, 0.20, 0.20], [0.21, 0.21, 0.21])
    fast_mode = ([0.021, 0.020, 0.022], [0.020, 0.020, 0.021], [0.020, 0.021, 0.021])   # another draw, 10x cheaper
    half_hidden = ([0.110, 0.113, 0.112], [0.204, 0.205, 0.204], [0.205, 0.205, 0.206])
    no_window = ([], [], [])
    assert guards.phase_verdict_by_trial([honest, fast_mode, no_window]) == (None, "")
    reason, message = guards.phase_verdict_by_trial([honest, no_window, half_hidden])
    assert reason == guards.PHASE_MISMATCH and message.startswith("trial 2: on the same inputs")
    assert guards.phase_verdict_by_trial([]) == (None, "")


def test_phase_ratio_is_the_median_over_pairs_that_traced_a_kernel():
    assert guards.phase_ratio([0.1, 0.2, 0.3], [0.1, 0.0, 0.2], [0.2, 0.1, 0.2]) == pytest.approx(1.25)
    assert guards.phase_ratio([0.1], [0.0], [0.0]) is None
    assert guards.phase_ratio([], [], []) is None
    # the threshold is the named constant: just above passes, just below fails
    ok = guards.PHASE_MIN_RATIO * 1.01
    assert guards.phase_verdict([ok], [1.0], [1.0])[0] is None
    assert guards.phase_verdict([guards.PHASE_MIN_RATIO * 0.99], [1.0], [1.0])[0] == guards.PHASE_MISMATCH


# -- the buffer sets of an alloc reply ------------------------------------------------------------
_IN_META = [("x", [2, 8], "bfloat16"), ("eps", None, "float32"), ("w", [8], "bfloat16")]
_OUT_META = [("y", [2, 8], "bfloat16")]


def _honest_sets(count=2):
    return [{"inputs": [torch.zeros(2, 8, dtype=torch.bfloat16), torch.zeros(8, dtype=torch.bfloat16)],
             "outputs": [torch.zeros(2, 8, dtype=torch.bfloat16)]} for _ in range(count)]


def _problem(sets, count=2):
    return guards.buffer_sets_problem(sets, count, _IN_META, _OUT_META, torch.device("cpu"))


def test_honest_buffer_sets_have_no_problem():
    assert _problem(_honest_sets()) is None


def test_buffer_sets_sharing_memory_are_a_problem():
    across = _honest_sets()
    across[1]["outputs"][0] = across[0]["outputs"][0]                 # one output in two sets
    assert "share memory" in _problem(across)
    within = _honest_sets()
    within[0]["outputs"][0] = within[0]["inputs"][0]                  # an output that is an input
    assert "share memory" in _problem(within)
    overlap = _honest_sets()
    flat = torch.zeros(40, dtype=torch.bfloat16)
    overlap[0]["inputs"][0], overlap[0]["outputs"][0] = flat[:16].view(2, 8), flat[15:31].view(2, 8)
    assert "share memory" in _problem(overlap)                        # one element in common


def test_adjacent_views_of_one_allocation_are_not_sharing():
    sets = _honest_sets()
    flat = torch.zeros(32, dtype=torch.bfloat16)
    sets[0]["inputs"][0], sets[0]["outputs"][0] = flat[:16].view(2, 8), flat[16:].view(2, 8)
    assert _problem(sets) is None


@pytest.mark.parametrize("damage, words", [
    (lambda s: s.pop(), "expected 2 buffer sets"),
    (lambda s: s[0]["inputs"].pop(), "not a list of 2 tensors"),
    (lambda s: s[0].__setitem__("extra", []), "not an inputs/outputs record"),
    (lambda s: s[1]["outputs"].__setitem__(0, torch.zeros(2, 8, dtype=torch.float32)), "expected bfloat16"),
    (lambda s: s[1]["inputs"].__setitem__(1, torch.zeros(9, dtype=torch.bfloat16)), "expected bfloat16 [8]"),
    (lambda s: s[0]["inputs"].__setitem__(0, torch.zeros(8, 2, dtype=torch.bfloat16).t()), "not contiguous"),
    (lambda s: s[0]["outputs"].__setitem__(0, torch.zeros(2, 8, dtype=torch.bfloat16).as_subclass(_Sub)),
     "not a plain tensor"),
])
def test_malformed_buffer_sets_are_a_problem(damage, words):
    sets = _honest_sets()
    damage(sets)
    assert words in _problem(sets)


class _Sub(torch.Tensor):
    pass
