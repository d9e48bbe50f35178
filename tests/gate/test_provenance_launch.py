"""Provenance by launch, not by name (guards.attribute_kernels, issue 22 item 4): CUPTI names
from the H200 indexer records (results/h200/2026-11-30-v9: the DeepGEMM + FlashInfer baseline's
kernels) judged as if an untrusted solution had produced them."""

from kernelwright.gate import guards

DEEPGEMM = "_ZN9deep_gemm25sm90_fp8_paged_mqa_logitsILj1ELj64ELj128ELj64ELb1ELb0ELj3ELj3ELj256ELj128ELj512EfEEvj"
RADIX = "_ZN10flashinfer8sampling23RadixTopKKernel_UnifiedILj1024ELj4ELb1ELb0ELNS0_13RadixTopKModeE1EfiEEvPT4"
VENDOR_CALL = {DEEPGEMM: [8, 400.0], RADIX: [8, 240.0]}


def test_a_never_launched_jit_named_like_the_vendor_kernel_no_longer_counts():
    # the hole: a @triton.jit function named exactly like the mangled kernel made it "own"
    assert guards.classify_kernel(DEEPGEMM, [DEEPGEMM, RADIX]) == "solution"
    reason, _ = guards.provenance_verdict(VENDOR_CALL, own_names=[], launched={}, durations=None)
    assert reason == guards.NO_KERNELS
    # even declared as a __global__ name, a vendor pattern wins
    reason, _ = guards.provenance_verdict(VENDOR_CALL, own_names=[DEEPGEMM], launched={})
    assert reason == guards.NO_KERNELS


def test_a_trivial_kernel_that_takes_the_vendor_name_claims_only_its_own_time():
    kernels = {DEEPGEMM: [16, 402.0], RADIX: [8, 240.0]}
    durations = {DEEPGEMM: [50.0] * 8 + [0.25] * 8, RADIX: [30.0] * 8}
    split = guards.attribute_kernels(kernels, {DEEPGEMM: 8}, durations)
    assert split[DEEPGEMM]["solution"] == 2.0 and split[DEEPGEMM]["vendor"] == 400.0
    reason, _ = guards.provenance_verdict(kernels, launched={DEEPGEMM: 8}, durations=durations)
    assert reason == guards.VENDOR_KERNELS


def test_the_honest_triton_indexer_and_a_cuda_solution_pass():
    honest = {"_all_selected_kernel": [8, 11.1], "void at::native::vectorized_elementwise_kernel<4>": [8, 1.0]}
    assert guards.provenance_verdict(honest, launched={"_all_selected_kernel": 8})[0] is None
    cuda = {"void my_topk_kernel<128>(float const*, int*)": [8, 50.0]}
    assert guards.provenance_verdict(cuda, own_names=["my_topk_kernel"], launched={})[0] is None
    # an unknown name the solution did not launch and does not declare is not its own
    assert guards.provenance_verdict({"mystery_kernel": [8, 50.0]}, launched={})[0] == guards.NO_KERNELS
    # without a launch record (the torch-profiler path) unknown names keep the old benefit of the doubt
    assert guards.provenance_verdict({"mystery_kernel": [8, 50.0]})[0] is None


# -- launches replayed from a CUDA graph (the shipped solutions replay their own graphs) --------

class _FakeGraph:
    """Stands in for torch.cuda.CUDAGraph on the CPU: the three methods the counter wraps."""

    def capture_begin(self, *args, **kwargs):
        pass

    def capture_end(self):
        pass

    def replay(self):
        pass


def _counting_graph_class():
    from kernelwright.gate.worker import LaunchCounter

    cls = type("Graph", (_FakeGraph,), {})
    state, by_name, capture = {"total": 0}, {}, {"names": None}
    LaunchCounter._count_graph_replays(cls, state, by_name, capture)
    return cls, state, by_name, capture


def test_each_replay_counts_the_launches_captured_into_the_graph():
    cls, state, by_name, capture = _counting_graph_class()
    g = cls()
    g.capture_begin()
    capture["names"]["_score_kernel"] = 2         # what the JIT wrapper records while capturing
    capture["names"]["_topk_kernel"] = 1
    g.capture_end()
    assert capture["names"] is None and by_name == {}
    g.replay()
    g.replay()
    assert by_name["_score_kernel"][0] == 4 and by_name["_topk_kernel"][0] == 2 and state["total"] == 6
    # a graph the counter never saw captured adds nothing, nor does an attribute on the graph
    other = cls()
    other.launches = {"_score_kernel": 100}
    other.replay()
    assert by_name["_score_kernel"][0] == 4


def test_the_shipped_solutions_pass_provenance_when_their_kernels_come_from_a_graph():
    # the CUPTI names of one H200 MoE call replayed from the solution's graph (2026-12-02), with
    # the launch counts the replay wrapper now reports: not NO_KERNELS
    kernels = {"_align_kernel": [3, 6.0], "_gemm1_kernel": [3, 60.0], "_gemm1_splitk_epilogue": [3, 6.0],
               "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIiEESt5arrayIPcLm1EEEEviT0_T1_": [3, 3.0]}
    launched = {"_align_kernel": 3, "_gemm1_kernel": 3, "_gemm1_splitk_epilogue": 3}
    assert guards.provenance_verdict(kernels, launched=launched)[0] is None
    assert guards.provenance_verdict(kernels, launched={})[0] == guards.NO_KERNELS
