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
# A stand-in for torch.cuda.CUDAGraph on the CPU: ``_Base`` plays the C class (what really
# captures and replays; "the device" is RAN), ``Graph`` torch's Python class over it.  The attacks
# are those of the red-team review of 2026-12-02 (each credited 8 launches of a vendor kernel's
# name that never ran before the counter was hardened).

X = DEEPGEMM
RAN: list = []


class _Base:
    capturing: list = []

    def __init__(self):
        self.content, self.execs = [], 0

    def capture_begin(self, *a, **k):
        _Base.capturing.append(self)

    def capture_end(self):
        _Base.capturing.remove(self)
        self.execs += 1                      # a new executable graph per capture

    def replay(self):
        (_Base.capturing[-1].content if _Base.capturing else RAN).extend(self.content)

    def reset(self):
        self.content = []

    def raw_cuda_graph_exec(self):
        return (id(self), self.execs)


def _counting_graph_class():
    from kernelwright.gate.worker import LaunchCounter

    class Graph(_Base):
        def capture_begin(self, *a, **k):
            super().capture_begin(*a, **k)

        def capture_end(self):
            super().capture_end()

        def replay(self):
            super().replay()

        def reset(self):
            super().reset()

    state, by_name = [0, False, 0], {}          # the counter's slots: total, ablate, frame-watched
    note = LaunchCounter._count_graph_replays(Graph, state, by_name, lambda: bool(_Base.capturing),
                                              lambda: id(_Base.capturing[-1]) if _Base.capturing else None)
    RAN.clear()
    _Base.capturing.clear()
    return Graph, state, by_name, note


def _launch(note, name, into, n=1):
    """A Triton launch on a capturing stream: captured into ``into``, noted by the JIT wrapper."""
    into.content.extend([name] * n)
    for _ in range(n):
        note(name)


def test_each_replay_counts_the_launches_captured_into_the_graph():
    G, state, by_name, note = _counting_graph_class()
    g = G()
    g.capture_begin()
    _launch(note, "_score_kernel", g, 2)
    _launch(note, "_topk_kernel", g)
    g.capture_end()
    assert by_name == {}
    g.replay()
    g.replay()
    assert RAN.count("_score_kernel") == 4
    assert by_name["_score_kernel"][0] == 4 and by_name["_topk_kernel"][0] == 2 and state[0] == 6
    other = G()                       # never captured through the wrapper; an attribute adds nothing
    other.launches = {"_score_kernel": 100}
    other.replay()
    assert by_name["_score_kernel"][0] == 4


def test_a_capture_ended_through_the_c_class_credits_no_later_graph():
    G, state, by_name, note = _counting_graph_class()
    decoy, g = G(), G()
    decoy.capture_begin()
    _launch(note, X, decoy, 8)
    _Base.capture_end(decoy)          # torch._C._CUDAGraph.capture_end: not wrapped
    _Base.capture_begin(g)
    g.content.append(X)               # the vendor kernel of the same name, captured
    G.capture_end(g)
    g.replay()
    assert RAN == [X] and X not in by_name


def test_two_open_captures_count_nothing():
    G, state, by_name, note = _counting_graph_class()
    a, b = G(), G()
    a.capture_begin()
    b.capture_begin()
    _launch(note, X, a, 8)
    b.content.append(X)
    b.capture_end()
    a.capture_end()
    b.replay()
    assert X not in by_name


def test_reset_or_a_recapture_through_the_c_class_drops_the_count():
    G, state, by_name, note = _counting_graph_class()
    g = G()
    g.capture_begin()
    _launch(note, X, g, 8)
    g.capture_end()
    g.reset()
    _Base.capture_begin(g)
    g.content.append(X)
    _Base.capture_end(g)
    g.replay()
    assert X not in by_name
    h = G()                           # the same through the C class's reset: the executable changed
    h.capture_begin()
    _launch(note, X, h, 8)
    h.capture_end()
    _Base.reset(h)
    _Base.capture_begin(h)
    h.content.append(X)
    _Base.capture_end(h)
    h.replay()
    assert X not in by_name


def test_a_replay_inside_a_capture_is_not_counted():
    G, state, by_name, note = _counting_graph_class()
    g, outer = G(), G()
    g.capture_begin()
    _launch(note, X, g, 8)
    g.capture_end()
    _Base.capture_begin(outer)        # a capture the counter does not see
    g.replay()                        # records a child graph: nothing runs
    _Base.capture_end(outer)
    assert RAN == [] and X not in by_name


def test_a_subclass_of_the_graph_class_is_never_counted():
    G, state, by_name, note = _counting_graph_class()

    class Evil(_Base):
        def replay(self):
            pass                      # runs nothing

    class Mine(G, Evil):
        pass

    g = Mine()
    g.capture_begin()
    _launch(note, X, g, 8)
    g.capture_end()
    g.replay()
    assert RAN == [] and X not in by_name


def test_the_shipped_solutions_pass_provenance_when_their_kernels_come_from_a_graph():
    # the CUPTI names of one H200 MoE call replayed from the solution's graph (2026-12-02), with
    # the launch counts the replay wrapper now reports: not NO_KERNELS
    kernels = {"_align_kernel": [3, 6.0], "_gemm1_kernel": [3, 60.0], "_gemm1_splitk_epilogue": [3, 6.0],
               "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIiEESt5arrayIPcLm1EEEEviT0_T1_": [3, 3.0]}
    launched = {"_align_kernel": 3, "_gemm1_kernel": 3, "_gemm1_splitk_epilogue": 3}
    assert guards.provenance_verdict(kernels, launched=launched)[0] is None
    assert guards.provenance_verdict(kernels, launched={})[0] == guards.NO_KERNELS
