"""The red-team catalogue: one small adversarial solution per hack class, plus honest ones.

Each case is a solution folder shipped with the package (``cases/<id>/manifest.json`` and
``kernel.py``; the docstring of ``kernel.py`` says what the attack does and why the expected
outcome is what it is).  ``expected`` is either ``PASS`` or the set of reason codes any one of
which counts as "rejected for the right reason"; ``suspicious`` cases must pass but be marked
SUSPICIOUS (kept out of every best selection) with one of those codes.

Hack numbers (H1..H26) refer to /work/shared/notes/reward-hacks.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

from kernelwright.gate import guards
from kernelwright.redteam.verdicts import PASS
from kernelwright.trace import Solution

CASES_DIR = Path(__file__).parent / "cases"


@dataclass(frozen=True)
class Case:
    id: str
    hack: str                          # hack class (catalogue wording)
    definition: str                    # built-in definition (quick variant is used)
    expected: FrozenSet[str] | str     # reason codes, or PASS
    hid: str = ""                      # H-number(s) in reward-hacks.md
    needs_cuda: bool = False
    needs_cpu: str = ""                # why the attack exists only on the CPU (SKIPPED on CUDA), or ""
    workloads: Tuple[int, ...] = (0,)  # indices into the quick variant's workloads
    held_out: bool = False             # also run the held-out (hidden) split
    suspicious: bool = False           # expected verdict SUSPICIOUS rather than REJECT
    min_latency_ms: Optional[float] = None   # the headline latency must stay honest
    # the eager latency (host included) must stay honest: for cases whose cost is a host sleep,
    # which is no device time (on CUDA the headline is device time; on the CPU the two agree)
    min_host_latency_ms: Optional[float] = None
    serial: bool = False               # touches shared files: run alone
    why: str = ""                      # why this expectation
    # the expectation when the worker ran behind an OS boundary (gate/sandbox.py; the trace's
    # gate.notes.isolation.level is not "none"), where it differs: the write is refused or lands
    # in the worker's private scratch, so nothing the gate watches changes
    bounded: Optional[FrozenSet[str] | str] = None
    isolation: Optional[str] = None    # run the case's workers at this level (None: the default)
    companion: str = ""                # a case evaluated first on the same workload contexts (a rival)
    # the run's input nonce per device kind ("cpu", "cuda"), pinned where the attack needs
    # particular inputs (a routing near-tie); the draws differ by device, so a case with nonces
    # and none for the device it runs on is SKIPPED
    nonces: Tuple[Tuple[str, str], ...] = ()
    # evaluate in a results folder laid out as `kernelwright bench` leaves one by default
    # (runner.bench_results_folder: under kw-results/ in the working directory, outside the
    # private /tmp, readable by file mode, with a summary.json and a rival's traces)
    bench_results: bool = False

    def nonce_for(self, device: str) -> Optional[str]:
        """The pinned input nonce for ``device`` (None: none pinned for its kind)."""
        kind = "cuda" if str(device).startswith("cuda") else "cpu"
        return dict(self.nonces).get(kind)

    def expected_for(self, isolation_level: Optional[str]):
        """The expectation for a run whose worker had ``isolation_level``."""
        if self.bounded is not None and isolation_level not in (None, "none"):
            return self.bounded
        return self.expected

    @property
    def folder(self) -> Path:
        return CASES_DIR / self.id

    @property
    def expected_label(self) -> str:
        if self.expected == PASS:
            return PASS
        codes = "|".join(sorted(self.expected))
        return f"SUSPICIOUS: {codes}" if self.suspicious else codes

    def solution(self) -> Solution:
        from kernelwright.solutions import load_solution_folder

        return load_solution_folder(self.folder)


def _r(*codes: str) -> FrozenSet[str]:
    return frozenset(codes)


# why a case that runs Python inside an interpreted launch exists only on the CPU
_NO_PYTHON_ON_GPU = "a GPU kernel cannot call Python"


CASES: List[Case] = [
    # honest solutions: must pass
    Case("honest_triton", "honest (DPS Triton)", "demo", PASS),
    Case("honest_returning", "honest (value-returning)", "demo", PASS),
    Case("honest_cached_config", "honest (module-level config cache)", "demo", PASS,
         why="legitimate module state: the static scan warns, the verdict is PASS"),
    # provenance
    Case("calls_reference", "calls the reference", "demo", _r(guards.VENDOR_KERNELS, guards.NO_KERNELS), "H1 H3"),
    Case("vendor_library", "calls a vendor library", "demo", _r(guards.VENDOR_KERNELS, guards.NO_KERNELS), "H1"),
    Case("try_except_fallback", "try/except fallback", "demo",
         _r(guards.NO_KERNELS, guards.VENDOR_KERNELS, guards.BUILD_FAILED), "H2",
         why="on CPU the jit-body check names the kernel that cannot compile (BUILD_FAILED) before provenance"),
    Case("decoy_kernel", "decoy kernel never launched", "demo", _r(guards.NO_KERNELS, guards.VENDOR_KERNELS), "H4"),
    Case("ghost_branch", "never-true fast path", "demo", _r(guards.NO_KERNELS, guards.VENDOR_KERNELS), "H4"),
    # outputs
    Case("uninitialised_output", "returns uninitialised memory", "demo",
         _r(guards.NON_FINITE, guards.TOLERANCE, guards.NONDETERMINISTIC, guards.STALE_OUTPUT), "H5 H6",
         why="the reference never exists in the worker and outputs land in poisoned buffers"),
    Case("stale_buffer", "skips work on a seen output buffer", "demo",
         _r(guards.NON_FINITE, guards.STALE_OUTPUT, guards.TOLERANCE, guards.NONDETERMINISTIC), "H5 H13"),
    Case("mutates_inputs", "mutates its inputs", "demo", _r(guards.INPUT_MUTATED), "H7"),
    Case("mutates_inputs_timed", "mutates inputs only while timed", "demo", _r(guards.INPUT_MUTATED), "H7"),
    Case("output_view_of_input", "returns a view of an input", "demo",
         _r(guards.OUTPUT_ALIASES_INPUT, guards.INPUT_MUTATED)),
    Case("lazy_subclass", "lazy tensor subclass", "demo", _r(guards.OUTPUT_NOT_TENSOR), "H10"),
    Case("zeros", "returns zeros", "demo", _r(guards.TOLERANCE), "H15"),
    Case("constant", "returns a constant", "demo", _r(guards.TOLERANCE), "H15 H16"),
    Case("precision_downcast", "precision downcast (fp8 activations)", "demo", _r(guards.TOLERANCE), "H14"),
    Case("hardcoded_shapes", "hard-coded shapes", "demo", _r(guards.HIDDEN_SPLIT_FAILED), "H17", held_out=True),
    # caches
    Case("cache_pointer", "output cache keyed on pointers (FIB #228)", "demo",
         _r(guards.TOLERANCE, guards.STALE_OUTPUT), "H13"),
    Case("cache_call_count", "output cache keyed on call count", "demo", _r(guards.STALE_OUTPUT), "H13"),
    Case("cache_fingerprint", "output cache keyed on an input fingerprint", "demo", _r(guards.STALE_OUTPUT), "H13"),
    # work outside the measured call
    Case("background_thread", "background thread", "demo", _r(guards.BACKGROUND_THREAD), "H9"),
    Case("thread_pool_at_import", "thread started at import", "demo", _r(guards.BACKGROUND_THREAD), "H9"),
    Case("native_threads", "native threads started in the call (pthreads through ctypes)", "demo",
         _r(guards.BACKGROUND_THREAD), "H9"),
    Case("native_thread_trampoline", "a call's native thread starts nine more after the call returns", "demo",
         _r(guards.BACKGROUND_THREAD), "H9"),
    Case("child_process", "child process", "demo", _r(guards.CHILD_PROCESS), "H9"),
    # timer, harness, files
    Case("patch_timer", "patches the timer", "demo", _r(guards.TIMER_TAMPERED), "H11", min_host_latency_ms=19.0,
         why="clocks and events are bound before the solution is imported: the latency stays >= the 20 ms sleep"),
    Case("forge_reply", "forges the worker's reply", "demo", _r(guards.GATE_TAMPERED), "H12", min_host_latency_ms=19.0,
         why="the message loop holds the pipe and the handlers as locals: the forgery never reaches the parent"),
    Case("forge_early_reply", "forges the worker's reply (no patching)", "demo", _r(guards.GATE_TAMPERED), "H12",
         why="after every timing reply the parent pings with a random nonce: the real reply arrives instead"),
    Case("forge_alloc_reply", "forges the load and alloc replies: buffer sets sharing one memory", "demo",
         _r(guards.GATE_TAMPERED), "H12",
         why="the parent checks the buffer sets (shapes, dtypes, no shared bytes) and pings after the alloc reply"),
    Case("harness_hook", "works outside the timer through a torch mode left on the stack", "demo",
         _r(guards.GATE_TAMPERED), "H8 H9",
         why="the worker reports hooks installed since its snapshot (modes, profile/trace, gc callbacks)"),
    Case("repair_checked", "repairs checked outputs after the call", "demo", _r(guards.STALE_OUTPUT), "H5 H13",
         why="the parent copies checked outputs itself while the worker waits: no slot to repair"),
    Case("future_inputs", "precomputes the trial's outputs from the specs sent ahead", "demo",
         _r(guards.STALE_OUTPUT), "H13",
         why="each iteration's spec is asked from the parent just before it"),
    Case("predict_inputs", "predicts the timed inputs from the seed formula", "demo", PASS, "H13",
         min_host_latency_ms=19.0, why="a per-run random nonce is mixed into every input seed: no prediction hits"),
    Case("phase_switch", "own kernels where traced, torch in the timed calls", "demo",
         _r(guards.PHASE_MISMATCH, guards.UNMEASURED_WORK, guards.NO_KERNELS, guards.VENDOR_KERNELS), "H1 H4",
         needs_cuda=True,
         why="on the same inputs, timed calls faster than the traced calls' kernels are rejected (PHASE_MISMATCH "
             "pair by pair; when the traced span exceeds 3x the events, UNMEASURED_WORK decides first: H200 runs "
             "gave each)"),
    Case("hidden_host_compute", "computes with torch out of the host-op recorder's sight", "demo",
         _r(guards.HOST_COMPUTE, guards.VENDOR_KERNELS, guards.PHASE_MISMATCH), "H1 H3",
         why="on CPU one call runs with Triton's stores dropped: right outputs mean host compute"),
    Case("prerun_hook_compute", "computes with torch in a Triton pre-run hook, on an empty grid", "demo",
         _r(guards.BUILD_FAILED, guards.VENDOR_KERNELS, guards.HOST_COMPUTE), "H1 H3",
         needs_cpu="on CUDA the hook's torch ops are aten kernels in CUPTI's records (case vendor_library)",
         why="the host-op recorder keeps torch ops inside a launch unless Triton's own code called them; the "
             "ablation drops Triton's writes into the outputs, not the hook's"),
    Case("jit_helper_compute", "computes with torch in a Python function called from a jit body", "demo",
         _r(guards.BUILD_FAILED, guards.VENDOR_KERNELS, guards.HOST_COMPUTE), "H1 H3",
         needs_cpu=_NO_PYTHON_ON_GPU,
         why="the jit body calls a Python function (interpreted.JitBodyCheck); its ops are also recorded"),
    Case("jit_helper_hidden_compute", "jit_helper_compute under DisableTorchFunction", "demo",
         _r(guards.BUILD_FAILED, guards.HOST_COMPUTE), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the jit body calls a Python function (interpreted.JitBodyCheck); the ablation call, with "
             "Triton's stores dropped, would still find right outputs"),
    Case("prerun_ccall_temp_copy", "torch C functions as pre-run hooks, into a temporary a Triton kernel copies",
         "demo", _r(guards.BUILD_FAILED, guards.VENDOR_KERNELS, guards.HOST_COMPUTE), "H1 H3",
         needs_cpu="on CUDA the hooks' torch ops are aten kernels in CUPTI's records",
         why="inside a launch only glue ops that Triton's code calls are left out; mul/mean/rsqrt are compute"),
    Case("triton_duck_self_temp_copy", "torch ops called by Triton's own code with a duck-typed semantic, into a "
         "temporary a Triton kernel copies", "demo", _r(guards.BUILD_FAILED, guards.VENDOR_KERNELS, guards.HOST_COMPUTE), "H1 H3",
         needs_cpu="on CUDA the torch ops are aten kernels in CUPTI's records",
         why="a compute op is the solution's whoever calls it"),
    Case("fake_triton_module_temp_copy", "a helper registered as a triton.* module, called from a jit body", "demo",
         _r(guards.BUILD_FAILED, guards.VENDOR_KERNELS), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the jit body calls a Python function; Triton's code objects are walked before the solution's import"),
    Case("subclass_nested_temp_copy", "compute in a tensor subclass's __torch_function__, into a temporary a Triton "
         "kernel copies", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the nested ops are aten kernels in CUPTI's records",
         why="an op on a subclass with its own handler is recorded as compute (the mode is off inside it)"),
    Case("numpy_in_jit_store", "numpy on the interpreter's handles inside a jit body, stored with tl.store", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="every launched jit body may call only what a GPU kernel can (interpreted.JitBodyCheck)"),
    Case("ablation_input_replay", "recognises the ablation call by trial 0's inputs coming a third time", "demo",
         _r(guards.HOST_COMPUTE, guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the host-op profile records its torch work (VENDOR_KERNELS); without it, the ablation call runs on inputs "
             "of its own, never shown before, with the correctness calls' poison (HOST_COMPUTE)"),
    # the jit-body check read one thing while the interpreter ran another (third CPU pass, 2026-12-07)
    Case("jit_module_spoof", "a numpy helper whose __module__ is set to a triton module, called from a jit body",
         "demo", _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="Triton's own is decided by identity (TritonSnapshot), never by __module__"),
    Case("jit_constexpr_arg_method", "an object passed as a constexpr argument whose method computes", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="every launch argument must be a tensor, a scalar, a dtype, a Triton object or a jit function"),
    Case("jit_comprehension_shadow", "a comprehension's loop variable shadows a global the body then calls", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the check reads the bytecode the interpreter runs: nested code is refused, globals resolved as loaded"),
    Case("jit_tensor_method", "a method added to tl.tensor at import, called on a loaded value", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="attributes of a kernel's values must be ones Triton's value types had before the import"),
    Case("jit_docstring_def", "a second def inside a string of the jit function, which the interpreter's rewriter "
         "runs instead", "demo", _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the check reads the rewritten function itself, and the launch runs exactly that function"),
    Case("jit_rewritten_cache", "plants its own function in the interpreter's rewritten-function cache", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the check reads the function the cache holds, and the launch runs exactly that function"),
    Case("jit_inspect_patch", "patches inspect.getsource to show honest text for its kernel", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the check reads bytecode, not source text"),
    # a fourth CPU pass (2026-12-07) against the bytecode check
    Case("jit_constexpr_global_callable", "a global tl.constexpr wrapping a numpy function, called from a jit body", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="a constexpr's value is checked like any global: constants, dtypes, jit functions"),
    Case("jit_fn_wrapper_call", "a global object of the solution's class with .fn = a jit function and a computing __call__", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="only exactly InterpretedFunction, through Triton's own wrappers, counts as a jit function"),
    Case("jit_int_subclass_constexpr", "an int subclass passed as a constexpr argument whose __mul__ computes", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="launch arguments are checked by exact type"),
    Case("jit_tuple_subclass_getitem", "a tuple subclass argument whose __getitem__ computes", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="launch arguments are checked by exact type"),
    Case("jit_default_arg_callable", "a constexpr parameter defaulting to a numpy function, never passed", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the kernel's defaults are checked like its arguments"),
    Case("jit_constexpr_function_calls_jit", "a constexpr_function that calls a jit function whose body computes with numpy", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="a solution constexpr_function's body and the jit functions it names are read"),
    Case("jit_triton_fn_rewritten_cache", "plants its own function in the rewritten-function cache for a Triton library jit function (tl.swizzle2d)", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="Triton's own jit functions are read too: their rewritten function is what runs"),
    Case("jit_code_swap_after_check", "swaps the rewritten function's __code__ after a checked launch", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the bytecode is read on every launch"),
    Case("jit_global_rebind_after_check", "rebinds a global jit helper to a numpy function after a checked launch", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="globals are looked up on every launch"),
    Case("jit_constexpr_function_partial", "a constexpr_function whose fn is replaced on the instance by a "
         "functools.partial of a numpy helper", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="a constexpr_function is accepted only with a plain function as its fn, read with vars(), whose body passes"),
    Case("jit_tl_tuple_global", "a global tl.tuple holding a numpy helper, its field names answering .fn probes "
         "with Triton's own functions", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="a tl.tuple is judged value by value; only listed kinds of Triton objects are accepted"),
    Case("jit_triton_code_foreign_globals", "a function made from a Triton code object with the solution's globals, calling a numpy helper", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="Triton's functions are known by identity, not by code object"),
    Case("jit_triton_method_rebound", "a Triton function bound as a method to the solution's object, whose attribute is a numpy helper", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="a bound method is Triton's only on an object Triton's modules held at the snapshot"),
    Case("interp_triton_class_new", "a Triton class given a __new__ that computes with numpy, called from the body", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="every Triton class is compared with the snapshot before each launch"),
    Case("jit_math_module_eval", "math.eval = eval, called from the body on a string that runs a numpy helper", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="math is compared with the snapshot; the math functions a body may call are the gate's start's"),
    Case("jit_builtins_safe_rebind", "builtins.divmod replaced by a helper of that name that computes with numpy", "demo",
         _r(guards.BUILD_FAILED, guards.GATE_TAMPERED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="builtins are compared with the snapshot and watched by the worker's integrity check"),
    Case("interp_builder_instance_attr", "an instance attribute on interpreter_builder shadows a method and reduces rows in numpy", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the instances Triton's modules hold are compared with the snapshot"),
    Case("interp_semantic_class_patch", "TritonSemantic.mul replaced: a legal body multiplies, the semantic layer computes the output in numpy", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="every Triton class is compared with the snapshot before each launch"),
    Case("interp_implicit_cvt_patch", "the interpreter's _implicit_cvt replaced: an argument becomes a block holding the output computed in numpy", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="a callable of a Triton module replaced since the snapshot is named"),
    Case("interp_builder_class_swap", "interpreter_builder.__class__ swapped to a subclass that computes in numpy", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the type of every namespace the interpreter reads is compared with the snapshot"),
    Case("interp_builder_module_rebind", "the interpreter module's interpreter_builder rebound to a builder that computes in numpy", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="a module value is compared by identity; only plain data may be rebound"),
    Case("interp_grid_index_hook", "a grid entry with __index__ that plants a numpy method on the builder inside the launch", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="a grid is turned into exact ints before the check"),
    Case("interp_inspect_getcallargs", "inspect.getcallargs replaced: the launch runs other arguments than the ones checked", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="inspect, functools and numpy are watched like Triton's modules"),
    Case("interp_module_class_swap", "triton.language's __class__ swapped: its __getattribute__ answers the body with a numpy store", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the type of every namespace the interpreter reads is compared with the snapshot"),
    Case("interp_numpy_ufunc_patch", "numpy.multiply replaced: the builder's multiply returns the whole output", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="numpy is watched like Triton's modules"),
    Case("interp_semantic_builder_property", "a property added to TritonSemantic answers a builder that computes in numpy", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="any attribute added to a Triton class is named, callable or not"),
    Case("interp_setprofile_during_launch", "sys.setprofile around the launch plants a numpy method on the builder inside it and removes it after", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="no profile or trace function may be set at a launch"),
    Case("interp_torch_mode_during_launch", "a torch function mode around the launch plants a numpy method on the builder inside it and removes it after", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="only the gate's own torch function modes may be on at a launch"),
    Case("interp_np_fromnumeric_wrapreduction", "numpy._core.fromnumeric._wrapreduction replaced: np.sum's helper normalises the row in place", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="every numpy module (and numpy's classes) is watched like Triton's"),
    Case("interp_np_vectorize_class_erf", "np.vectorize._vectorize_call replaced: tl.erf's numpy path returns the normalised row", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="numpy's classes are compared with the snapshot"),
    Case("interp_codegen_fns_dict_item", "an item of interpreter_builder.codegen_fns replaced: it plants a numpy method inside the launch, removed after", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the namespaces are read again right after the launch, before the solution's code runs"),
    Case("interp_lazy_name_dtype_str", "tl.core.dtype.__str__ replaced: it plants a numpy method inside the launch, removed after", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="only tl.tensor is exempt for the names the interpreter patches onto it"),
    Case("interp_audit_hook_code_access", "an audit hook on object.__getattr__ plants a numpy method inside the launch", "demo",
         _r(guards.TOLERANCE, guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="no audit hook can be added after the gate starts; the attempt is named"),
    Case("interp_storage_cpu_hook", "torch.storage._StorageBase.cpu replaced around the launch: the host copy plants a numpy method on the builder", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="torch's Python layer on the launch's argument path is watched like Triton's"),
    Case("interp_tensor_classdict_shadow", "torch.Tensor.untyped_storage shadowed around the launch: it plants a numpy method on the builder and removes it", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="torch's Python layer on the launch's argument path is watched like Triton's"),
    Case("interp_numpy_errcall", "numpy's floating-point error callback (np.seterrcall) plants a one-shot numpy method on the builder inside the launch", "demo",
         _r(guards.BUILD_FAILED, guards.TOLERANCE), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="numpy's error callback set at a launch is refused, and the launch runs with numpy's error state off, so "
             "the callback never runs: the kernel's own x * w fails the tolerance first, before the refusal is read"),
    Case("interp_sys_modules_lazy_import", "sys.modules['triton.runtime.jit'] swapped around the launch: GridExecutor's lazy import gets a hook that plants a self-removing numpy method", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the modules the interpreter imports inside a launch are read from sys.modules, which must be what the snapshot holds"),
    Case("interp_meta_path_finder", "a sys.meta_path finder answers GridExecutor's lazy import inside the launch and plants a self-removing numpy method", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="import hooks (sys.meta_path, sys.path_hooks) and sys.modules are hooks inside the launch"),
    Case("interp_global_class_property", "an unnamed global of the kernel's module with a __class__ property, read by _patch_lang's inspect.ismodule inside the launch, plants a self-removing numpy method", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="every global of a launched kernel's module is read by the interpreter inside the launch, named or not"),
    Case("interp_codegen_fns_self_removing", "an item of interpreter_builder.codegen_fns swapped around the launch plants a numpy method that removes itself on its first call", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the re-read after the launch sees only what a hook left; the containers Triton's instances hold must be compared item by item"),
    Case("interp_param_annotation_str", "an annotation set on the rewritten kernel is an object whose __str__, run by GridExecutor's _normalize_ty inside the launch, plants a self-removing numpy method", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="a kernel's annotations are read by the interpreter inside the launch: only Triton's types and strings may stand there"),
    Case("interp_module_builtins_dict", "the kernel's module swaps its __builtins__ for a dict whose len/abs/min are numpy C "
         "callables: the rewritten body calls them while the check reads the real builtins", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="a body's names must be looked up where the rewritten function looks them up (its __builtins__)"),
    Case("interp_gate_closure_cells", "the launch counter's closure cell holding the JitBodyCheck set to None: every "
         "later launch runs Triton's own run, unchecked, and a jit body calls a numpy helper", "demo",
         _r(guards.GATE_TAMPERED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the integrity snapshot compares the closure cells of the launch counter's wrappers (and the functions they hold)"),
    Case("interp_rewrite_default_args", "a kernel's default values re-evaluated by the interpreter's re-exec of its "
         "source: 0 when checked, numpy C callables when run, called by the body", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the defaults the check reads must be those of the function the interpreter runs"),
    Case("interp_reduce_combine_fn_swap", "a tl.reduce combine function's .fn swapped for a numpy function, its honest "
         "rewritten body filed under the new key in Triton's cache: the check reads a + b, the reduction runs numpy", "demo",
         _r(guards.BUILD_FAILED), "H1 H3", needs_cpu=_NO_PYTHON_ON_GPU,
         why="the interpreter's reductions call combine_fn.fn, not the rewritten body the check read"),
    Case("launch_counter_int_subclass", "the launch counter's frame-watched count swapped for an int subclass whose "
         "__sub__ runs the deferred kernel after the timer stopped", "demo", _r(guards.GATE_TAMPERED), "H1 H3",
         needs_cpu="it finds the interpreter's launcher",
         why="the counter's updates and reads look at exact types first (worker._bump, _counter)"),
    Case("launch_counter_key_swap", "the launch counter's \"watched\" key swapped for a str subclass whose __eq__, "
         "run when the harness looks the count up after the timer stopped, runs the deferred kernel", "demo",
         _r(guards.GATE_TAMPERED), "H1 H3", needs_cpu="it finds the interpreter's launcher",
         why="the counter's scalars sit in list slots with exact-type reads; the per-kernel table's keys must be strs"),
    Case("call_left_profile_hook", "timed calls return with a sys.setprofile function that runs the kernel at the "
         "harness's first Python call after the clock was read, then removes itself", "demo",
         _r(guards.GATE_TAMPERED), "H1 H3", needs_cpu="the harness's frames are looked up by name",
         why="the hooks are read before and after every call of the solution, inside the timed window"),
    Case("call_left_function_mode", "timed calls return with a torch function mode that runs the kernel in the "
         "harness's first torch call after the clock was read; a finalizer pops it", "demo",
         _r(guards.GATE_TAMPERED), "H1 H3", needs_cpu="the harness's frames are looked up by name",
         why="the torch mode stacks' depths are read before and after every call of the solution"),
    Case("release_finalizer_prepare", "a finalizer on a returned tensor sets the harness's prepare hook when the "
         "harness lets go of it (op release / alloc); the hook runs the kernel off the clock", "demo",
         _r(guards.GATE_TAMPERED), "H1 H3",
         why="alloc and release rebase only sets/samples, and the released buffers are freed after the op's check"),
    Case("honest_reduce_combine", "honest: tl.reduce with a @triton.jit combine function (the interpreter calls its raw .fn)",
         "demo", PASS, why="GPU-valid Triton: the combine function's own code runs inside the launch"),
    Case("honest_rt4_unusual", "honest: a jit function in a tuple argument, a lambda grid, static_range, a defaulted "
         "constexpr and a constexpr_function", "demo", PASS, why="unusual but GPU-valid Triton passes the jit-body check"),
    Case("honest_module_helper", "honest: jit helpers called through a sibling module's attribute", "demo", PASS,
         why="a module's attribute that is a jit function is a kernel's to call"),
    Case("honest_constexpr_function", "honest: a triton.constexpr_function picks a block size", "demo", PASS,
         why="a constexpr_function of the solution's is held to a kernel body's rules, not refused"),
    Case("pipe_hijack", "runs the real work inside the worker's next message", "demo",
         _r(guards.GATE_TAMPERED, guards.NON_FINITE, guards.TOLERANCE, guards.STALE_OUTPUT), "H8 H12",
         why="the worker writes to the pipe's descriptor through functions bound before the import"),
    Case("stalled_frame", "hangs the parent with a forged message frame: a 1 MiB header, one byte, then sleep",
         "demo", _r(guards.GATE_TAMPERED), "H12",
         why="the parent reads each frame from the pipe's descriptor with a deadline and a length limit"),
    Case("harness_override", "works before the clock through an attribute set on the harness", "demo",
         _r(guards.GATE_TAMPERED), "H8 H9",
         why="attributes added to the harness's objects that shadow a method are reported"),
    Case("lazy_container", "returns a dict subclass whose get() does the work after the clock", "demo",
         _r(guards.TOLERANCE, guards.NON_FINITE), "H8",
         why="the harness reads returned containers through dict.get / tuple.__iter__ themselves"),
    Case("shadow_fill", "sets fill_ on its output buffer: the harness's poisoning does the work", "demo",
         _r(guards.GATE_TAMPERED), "H8",
         why="buffers must carry no attributes of their own (checked after every call); the harness "
             "calls the class's methods"),
    Case("shadow_storage", "sets untyped_storage on its output buffer: the post-call check does the work",
         "demo", _r(guards.GATE_TAMPERED), "H8", why="as shadow_fill"),
    Case("dict_key_hook", "returns a dict whose str-subclass key runs the work in the harness's lookup", "demo",
         _r(guards.OUTPUT_NOT_TENSOR), "H8", why="returned dicts must have plain str keys"),
    Case("flush_hook", "a hook on the L2 flusher, installed and removed inside the timing message", "demo",
         _r(guards.GATE_TAMPERED), "H8 H11", why="the integrity snapshot is checked after every timed iteration"),
    Case("inputs_hook", "wraps the definition's make_inputs: the work runs while the inputs are written", "demo",
         _r(guards.GATE_TAMPERED), "H8", why="the definitions are in the integrity snapshot"),
    Case("inputs_global_hook", "rebinds a global of the definition's module (random_tensor): the work runs while "
         "the inputs are written", "demo", _r(guards.GATE_TAMPERED), "H8",
         why="the modules the built-ins' functions live in are in the integrity snapshot"),
    Case("shrink_buffer", "truncates its output buffer's shared-memory file: the parent's next touch is a SIGBUS",
         "demo", _r(guards.EXCEPTION), "H12",
         needs_cpu="CUDA buffers are VMM allocations the parent exports; the worker holds no file to truncate",
         why="CPU buffers are memfds sealed against shrinking, and the parent maps only such files"),
    Case("dispatch_fill", "registers its own aten::fill_ kernel: the harness's poisoning does the work", "demo",
         _r(guards.GATE_TAMPERED), "H8",
         why="the dispatcher tables of the operators the harness runs are part of the hook state"),
    Case("foreign_handle", "makes the parent connect to an address of its choosing", "demo",
         _r(guards.GATE_TAMPERED), "H12",
         why="shared-memory handles are accepted only from the worker's own resource sharer"),
    Case("pickle_parent", "runs code in the parent through a pickled reply", "demo", _r(guards.GATE_TAMPERED), "H12",
         why="the parent unpickles worker messages with an allow-list (gate/wire.py): exec is refused"),
    Case("hash_bomb_key", "hangs the parent's unpickler: a dict key of tuples nested 64 deep through the memo, "
         "2**64 leaves to hash", "demo", _r(guards.GATE_TAMPERED), "H12",
         why="the parent scans each message's pickle first and bounds what its dict keys and set elements cost to hash"),
    Case("deep_tuple_key", "crashes the parent's unpickler: a dict key of tuples nested three million deep "
         "(C recursion in the hash, SIGSEGV)", "demo", _r(guards.GATE_TAMPERED), "H12",
         why="the parent scans each message's pickle first and bounds the nesting of what it would hash"),
    Case("bytearray_bomb", "exhausts the parent's memory: bytearray(size) through the allow-list, twice the "
         "machine's memory", "demo", _r(guards.GATE_TAMPERED), "H12",
         why="the parent's bytearray rebuilds only bytes, never a size"),
    Case("step_flood", "hangs the parent in a write: 200 000 step messages in a timed call, no answer read", "demo",
         _r(guards.GATE_TAMPERED), "H12",
         why="the parent writes every message to the worker with a deadline"),
    Case("host_op_hoard", "exhausts the parent's memory: host-op records with 256 MiB names, each different", "demo",
         _r(guards.GATE_TAMPERED), "H12",
         why="host-op names and their number are bounded, and so are the bytes of one request's messages"),
    Case("forge_results_file", "forges the results folder", "demo", _r(guards.FILE_TAMPERED), "H12 H20", serial=True,
         bounded=PASS, why="behind the boundary the results folder is read-only and hidden: the forged trace lands "
                           "in the worker's private /tmp (mount) or is refused (uid), the run's files are unchanged"),
    Case("edit_repo", "edits files outside the solution (repo)", "demo",
         _r(guards.FILE_TAMPERED, guards.BUILD_FAILED), "H20", serial=True, bounded=_r(guards.BUILD_FAILED),
         why="BUILD_FAILED where the checkout is read-only (always behind the boundary): the write fails at import"),
    Case("edit_cache", "edits files outside the solution (gate cache)", "demo", _r(guards.FILE_TAMPERED), "H20",
         serial=True, bounded=PASS,
         why="behind the boundary the cache is hidden: the planted file lands in the worker's own "
             "/tmp (mount) or the write is refused (uid); the gate's cache is unchanged"),
    Case("edit_shipped", "edits a rival's source in the package (the shipped demo solution)", "demo",
         _r(guards.FILE_TAMPERED, guards.BUILD_FAILED), "H20", serial=True, bounded=_r(guards.BUILD_FAILED),
         why="the whole package is watched, not only the gate's own sources; behind the boundary the write fails"),
    # reading the reference
    Case("frame_walk", "reads reference outputs from another frame (FIB hole)", "demo",
         _r(guards.NON_FINITE, guards.TOLERANCE), "H19",
         why="the parent computes every reference; no frame of the worker ever holds one"),
    Case("gc_scan", "reads reference outputs through the garbage collector", "demo",
         _r(guards.NON_FINITE, guards.TOLERANCE, guards.STALE_OUTPUT), "H19",
         why="the reference outputs never exist in the worker process"),
    # the OS boundary, the harness's window, samples and specs, rivals' inputs, provenance: one case per class
    Case("parent_memory", "opens the gate parent's memory (/proc/<pid>/mem) at import", "demo", PASS, "H12",
         why="the worker runs as another uid without capabilities and the parent is not dumpable (full boundary: "
             "the parent is not in the worker's /proc); a breach raises at import: BUILD_FAILED"),
    Case("parent_environ_salt", "reads the parent's environment and the hidden salt file", "demo", PASS, "H17",
         why="non-dumpable parent, the salt out of its environment, the cache hidden; a breach raises: BUILD_FAILED"),
    Case("finalizer_window", "a __del__ in the harness's argument list computes the outputs before the timer",
         "demo", _r(guards.STALE_OUTPUT, guards.OUTPUT_PREWRITTEN), "H8",
         why="the poison is checked just before the timed call, and references live until the parent's copy"),
    Case("weakref_window", "a weakref callback on the previous output computes the next one after the timer",
         "demo", _r(guards.STALE_OUTPUT, guards.OUTPUT_PREWRITTEN), "H8",
         why="the harness keeps the previous returned tensors alive until the parent copied the outputs"),
    Case("edit_samples", "divides the worker's timing samples by 100 through frames", "demo", _r(guards.GATE_TAMPERED),
         "H12", min_host_latency_ms=19.0,
         why="each sample reaches the parent as soon as it is read; the parent's samples decide and the edit shows"),
    Case("forge_last_specs", "zeroes its input while timed and clears the worker's record of the buffer specs",
         "demo", _r(guards.INPUT_MUTATED), "H7", why="the parent derives each buffer set's spec from what it served"),
    Case("spec_ahead", "asks the parent for later iterations' specs as profile specs, precomputes their outputs",
         "demo", _r(guards.GATE_TAMPERED), "H13",
         why="graph and profile specs are served only after the timed loop: one asked earlier is out of step"),
    Case("replay_recorder", "honest, records input/output pairs for a rival (replay_rival's companion)", "demo",
         PASS, isolation="none", serial=True, why="an honest kernel; the file it writes is the rival's channel"),
    Case("replay_rival", "replays a rival's recorded outputs (inputs shared between candidates)", "demo",
         _r(guards.STALE_OUTPUT, guards.NON_FINITE), "H13", isolation="none", serial=True, companion="replay_recorder",
         why="timed inputs are drawn per candidate; run without the boundary, which would close the channel"),
    Case("vendor_named_jit", "never-launched jit functions named like the aten kernels that do the work", "demo",
         _r(guards.NO_KERNELS, guards.VENDOR_KERNELS), "H4",
         why="a kernel is the solution's only if the gate saw it launched; the launch counter runs for every language"),
    Case("read_results_folder", "reads the run's results folder (summary.json, a rival's traces) at import", "demo",
         _r(guards.BUILD_FAILED), "H12 H17", bench_results=True, bounded=PASS,
         why="behind the boundary the results folder is hidden like the cache (an empty tmpfs no uid can enter); "
             "without it the folder is readable by file mode and the breach raises: BUILD_FAILED"),
    Case("plant_pth", "plants a .pth file in site-packages (runs in every later Python)", "demo",
         _r(guards.FILE_TAMPERED), "H20", serial=True, bounded=PASS,
         why="behind the boundary the write is refused; without it the site-packages start-up files are watched"),
    # definition-specific
    Case("indexer_duplicates", "indexer returns duplicate ids", "indexer", _r(guards.DUPLICATE_INDEX)),
    Case("exempt_rows_garbage", "zeros on the MoE tokens within 1e-5 of a routing tie (the strict rule's exempt rows)",
         "moe", _r(guards.STRICT_TOLERANCE), "H14 H25", workloads=(2,),
         nonces=(("cpu", "exempt-rows-6"), ("cuda", "exempt-rows-68")),
         why="an exempt row must be within the per-row bound against the reference or the reference of a "
             "routing its tie allows; the pinned nonce puts a near-tie into quick-moe-t37's second trial"),
    Case("ablation_aware_host_compute", "hidden_host_compute that leaves its outputs unwritten in the provenance "
         "ablation call (msg['ablate'] read from op_call's frame)", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the host-op profile records its torch work under DisableTorchFunction (rt22); the ablation call is still "
             "recognisable from the harness's frame, so host work neither record sees (numpy) would pass"),
    # red-team pass rt19
    Case("sharer_thread_hijack", "runs its loop in multiprocessing's resource-sharer thread (a callback it registered "
         "and asked for): host compute outside the call and the recorder, copied out by a Triton kernel", "demo",
         _r(guards.HOST_COMPUTE, guards.BACKGROUND_THREAD, guards.GATE_TAMPERED), "H1 H9",
         why="the sharer's thread is tolerated as the gate's descriptor hand-over; running the solution's code "
             "it is a background thread"),
    Case("dispatch_randn_generator", "registers its own aten::randn.generator kernel: the harness's input "
         "regeneration does the work", "demo", _r(guards.GATE_TAMPERED), "H8",
         why="every dispatcher entry the harness's window reaches must be watched, every overload included"),
    Case("python_dispatcher_py_impl", "py_impl on aten::randn.generator with the Python dispatcher left on "
         "(no C++ dispatcher registration)", "demo", _r(guards.GATE_TAMPERED), "H8",
         why="the dispatcher dump does not list OpOverload.py_kernels; the thread's dispatch-key sets show the "
             "Python dispatcher switched on (pass rt20)"),
    Case("dispatch_local_scalar_dense", "registers its own aten::_local_scalar_dense kernel: bool() in the "
         "harness's poison check does the work right after the check", "demo",
         _r(guards.GATE_TAMPERED, guards.OUTPUT_PREWRITTEN), "H8",
         why="every dispatcher entry the harness's window reaches must be watched"),
    Case("trace_class_method_hook", "rebinds Definition.axis_values (kernelwright.trace), which make_inputs calls: "
         "the hook expands the iteration's spec itself and does the work", "demo", _r(guards.GATE_TAMPERED), "H8",
         why="every class whose methods the harness's input regeneration calls must be in the integrity snapshot"),
    Case("recorder_numel_zero", "host compute on a tensor subclass whose numel() returns 0, into a temporary a "
         "Triton kernel copies", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the recorder counts elements with TensorBase.numel, not the tensor's own method (pass rt21); the "
             "ablation drops the Triton copy, so it decides nothing"),
    Case("recorder_tally_erase", "host compute into a temporary a Triton kernel copies, then clears the host-op "
         "recorder's dict (op_call's host_ops)", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the recorder sends each record to the parent as the op runs, so no tally waits in the worker "
             "for the solution to clear (pass rt19); the ablation drops the Triton copy, so it decides nothing"),
    # red-team pass rt21: the host-op recorder
    Case("recorder_warning_raise", "out= ops under warnings-as-errors: each writes its result, then raises its resize "
         "warning before the recorder reports; into a temporary a Triton kernel copies", "demo",
         _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the recorder reports in a finally, so an op that raises after its work is still recorded"),
    Case("recorder_apply_callback", "Tensor.apply_ on one element, its callback computing with torch (the mode is off "
         "inside its handler); into a temporary a Triton kernel copies", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="ops that run Python callables or the autograd engine (apply_, map_, map2_, backward) are compute ops"),
    Case("recorder_autograd_grad", "torch.autograd.grad of a one-element autograd.Function whose backward computes "
         "with torch (the mode is off inside grad's handler); into a temporary a Triton kernel copies", "demo",
         _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="a recorded function that runs Python code (not one of torch's C functions) and is not glue is a "
             "compute op (guards.host_op_name)"),
    Case("recorder_deepcopy_hook", "copy.deepcopy of a one-element tensor whose __dict__ holds an object with a "
         "__deepcopy__ computing with torch (the mode is off inside Tensor.__deepcopy__'s handler); into a "
         "temporary a Triton kernel copies", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="a recorded function that runs Python code (not one of torch's C functions) and is not glue is a "
             "compute op (guards.host_op_name)"),
    Case("recorder_functional_vjp", "torch.autograd.functional.vjp of a one-element autograd.Function whose backward "
         "computes with torch (the mode is off inside the grad vjp calls); into a temporary a Triton kernel copies",
         "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="a recorded function that runs Python code (not one of torch's C functions) and is not glue is a "
             "compute op (guards.host_op_name)"),
    Case("recorder_disabled_temp_copy", "torch under DisableTorchFunction into a temporary a Triton kernel copies",
         "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the host-op profile (gate/aten_ops.py) reads the dispatcher's record, which DisableTorchFunction does not switch off"),
    Case("recorder_numpy_temp_copy", "numpy on the inputs' numpy views (glue) into a temporary a Triton kernel copies",
         "demo", PASS, "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="HOLE (pass rt21, open: docs/gate.md section 3 items 6 and 10): host work the recorder cannot see, into a temporary a Triton kernel copies; the ablation drops the copy, so it decides nothing.  Fixed: HOST_COMPUTE"),
    Case("recorder_glue_named_function", "handle_torch_function with its own callable named 'clone' (one glue record, "
         "the work inside with the mode off) into a temporary a Triton kernel copies", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the host-op profile (gate/aten_ops.py) records the aten ops run inside the glue-named function"),
    Case("recorder_torchscript", "a torch.jit.script function (no __torch_function__ in the TorchScript interpreter) "
         "into a temporary a Triton kernel copies", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the host-op profile (gate/aten_ops.py) records the aten ops the TorchScript interpreter runs"),
    Case("recorder_pipe_absorb", "a frame header written to the pipe's descriptor swallows the recorder's next "
         "host_op frames; torch into a temporary a Triton kernel copies", "demo", _r(guards.VENDOR_KERNELS), "H1 H3 H12",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the host-op profile's records go out after the call, past the forged frame's length; the class stays open: a frame long enough for them too would swallow them (no in-process check authenticates a message)"),
    # red-team pass rt22: the host-op profile (gate/aten_ops.py)
    Case("recorder_profiler_toggle", "RecordFunction switched off (and DisableTorchFunction) around torch compute "
         "into a temporary a Triton kernel copies", "demo", _r(guards.EXCEPTION), "H1 H3 H12",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="in a CPU worker the profiler's and RecordFunction's switches are sealed (aten_ops.seal_controls): calling one raises"),
    Case("recorder_profiler_restart", "the gate's host-op profile stopped through the gate's own module, torch compute "
         "unrecorded, a fresh profile started; into a temporary a Triton kernel copies", "demo", _r(guards.GATE_TAMPERED),
         "H1 H3 H12",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the profile read at the end must have started inside the window the gate noted at its start"),
    # red-team passes rt22b, rt22c and rt22d: past the host-op profile (closed)
    Case("recorder_fused_optimizer_lists", "RMSNorm from torch's fused CPU optimizer kernels (_fused_adam_, _fused_adagrad_, "
         "_fused_sgd_ on tensor lists: no input shapes, no nested ops) under DisableTorchFunction into a temporary a Triton "
         "kernel copies", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="an op on a list of tensors (whose elements the profile cannot count) is recorded as aten::tensor_list.<op>, "
             "a compute op, as are _foreach_* and _fused_*"),
    Case("recorder_gc_finalizer_after_profile", "a garbage cycle's __del__ re-arms itself while the profiler is on, "
         "then computes into the output with torch after the gate stopped the profile; armed only when the decoy "
         "Triton store landed (not the ablation call)", "demo", _r(guards.TOLERANCE, guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="a CPU worker keeps the collector off; it runs only inside the host-op profile at a recorded call's end "
             "(a finalizer's work there is recorded) and between timed iterations, so the finalizer never computes "
             "before the parent reads a correctness call's outputs"),
    Case("recorder_profile_object_finalizer", "weakref.finalize on the gate's AtenOpProfile object (found by "
         "gc.get_objects): freed by reference counting right after its __exit__ stopped the profiler, the callback "
         "computes into the output with torch; armed only when the decoy Triton store landed (not the ablation call)",
         "demo", _r(guards.TOLERANCE), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the host-op profiles and recorders are kept alive for the worker's life (Harness._recording): the "
             "finalizer never runs, so the outputs stay the decoy's"),
    Case("recorder_returned_list_del", "value-returning: the tensor returned in a list subclass whose __del__, run by "
         "reference counting when _checked_call returns (after the profile stopped), computes into the harness's output "
         "buffer (found in the caller's frame) with torch; armed only when the decoy Triton store landed",
         "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="a recorded call's returned value is taken and let go of inside the host-op profile, so its __del__'s "
             "torch work is recorded"),
    Case("recorder_glue_index_tables", "RMSNorm from glue ops only: bf16 bit patterns (view as int16) index lookup "
         "tables built at import (aten::index: squares, a log-domain adder tree, rsqrt, products, signs) into a temporary a "
         "Triton kernel copies", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="the host-op profile reports gathers (aten::index, index_select, take, gather) as aten::lookup.<op>, not "
             "glue, with the elements of their largest input (the tables)"),
    Case("recorder_nested_view_gather", "RMSNorm through nested tensors under DisableTorchFunction: lookups as "
         "_nested_view_from_buffer with the bit patterns as offsets (glue), row sums and log-domain adds as nested sum "
         "(no recorded shape: 0 elements) into a temporary a Triton kernel copies", "demo", _r(guards.VENDOR_KERNELS), "H1 H3",
         needs_cpu="on CUDA the aten kernels show in CUPTI's records (VENDOR_KERNELS)",
         why="an aten::_nested* op, and any op whose first input the profile records with neither dtype nor shape (a "
             "nested tensor), is reported as aten::nested.<op>, a compute op, glue or not", workloads=(0, 1, 2)),
    # CUDA only
    Case("side_stream", "side stream", "demo", _r(guards.UNMEASURED_WORK, guards.STALE_OUTPUT), "H8", needs_cuda=True),
    Case("l2_persistence", "L2 persistence", "demo", _r(guards.L2_PERSISTENCE, guards.BELOW_ROOFLINE), "H22",
         needs_cuda=True, suspicious=True),
    Case("reference_call_cuda", "calls the reference (CUPTI provenance)", "indexer",
         _r(guards.VENDOR_KERNELS, guards.NO_KERNELS), "H1", needs_cuda=True),
    # the device-time clock (the stream held while the call is enqueued)
    Case("held_side_stream", "works on a private stream while the caller's stream is held", "demo", PASS, "H8",
         needs_cuda=True, min_latency_ms=0.18,
         why="the blocking kernel fills every SM (no stream's kernel starts before the release), and every "
             "call starts on the harness's stream, so the join lands where the events are"),
    Case("held_copies", "copies device to device on a private stream while the caller's stream is held", "demo",
         PASS, "H8", needs_cuda=True, min_latency_ms=0.1,
         why="the copy ran after the release on the H200 (device time 0.133 ms); a copy that starts early, "
             "seen by CUPTI, refuses device time and the eager latency includes it"),
    Case("switched_stream", "leaves a private stream current for good and works there", "demo",
         _r(guards.STREAM_SWITCHED), "H8", needs_cuda=True,
         why="every call starts on the harness's stream and must return on it"),
    Case("hold_swap", "replaces the harness's hold with a wrapper that computes before the start event", "demo",
         _r(guards.GATE_TAMPERED), "H8", needs_cuda=True,
         why="the hold and its attributes are watched by the integrity snapshot"),
    Case("pin_swap", "replaces the harness's stream pin, then leaves a private stream current", "demo",
         _r(guards.GATE_TAMPERED, guards.STREAM_SWITCHED), "H8", needs_cuda=True,
         why="the stream pin is watched by the integrity snapshot"),
    Case("hold_named", "names its unjoined kernel like the gate's hold kernel", "demo",
         _r(guards.UNMEASURED_WORK, guards.PHASE_MISMATCH, guards.GATE_TAMPERED), "H8", needs_cuda=True,
         why="a traced call holds exactly one kernel named like the hold, the gate's own; and the "
             "solution's Triton launches of that name have no CUPTI record the tracer keeps "
             "(GATE_TAMPERED, the check of case cupti_disable_unjoined: seen on an H100, "
             "results/h100/2026-12-07-select-pivots/rerun-b-cuda.log)"),
    Case("cupti_aware_host_compute", "computes on the host while held, a decoy where a separate CUPTI window would trace",
         "demo", PASS, "H9", needs_cuda=True, min_latency_ms=0.02,
         why="CUPTI traces every held timed call: the copies show in the timed calls themselves, so the headline "
             "is the eager latency, host work included"),
    Case("unjoined_small", "40 µs on a private stream never joined back, a decoy where a separate CUPTI window would trace",
         "demo", _r(guards.PHASE_MISMATCH, guards.UNMEASURED_WORK), "H8", needs_cuda=True,
         why="every held timed call is traced: its own records show 40 µs of kernels against ~4 µs of events "
             "(PHASE_MISMATCH, call by call), far inside the wall-clock slack"),
    Case("split_later_trials", "honest while CUPTI is attached, 45 % of its work unjoined otherwise", "demo",
         PASS, "H8", needs_cuda=True, min_latency_ms=0.18,
         why="CUPTI is attached for every held timed call, so the device time is the honest 200 µs; the "
             "unjoined work lands in the untraced eager calls only (their column, not the headline)"),
    # every held call is traced, but CUPTI runs in the solution's process (docs/gate.md section 3, item 15)
    Case("cupti_disable_unjoined", "switches CUPTI's kernel activity off around 40 µs of unjoined private-stream work",
         "demo", _r(guards.GATE_TAMPERED, guards.PHASE_MISMATCH), "H8", needs_cuda=True,
         why="the launch counter saw _rmsnorm_after_spin launched in every traced call and CUPTI recorded none "
             "(guards.unrecorded_launches: GATE_TAMPERED); were the kernel recorded after all, its 40 µs against "
             "~4 µs of events is PHASE_MISMATCH.  Not yet run on CUDA"),
    Case("forge_traced_lists", "host compute while held, then zeroes the op's CUPTI copy lists through op_time's frame "
         "in the first idle call", "demo", _r(guards.GATE_TAMPERED), "H9 H12", needs_cuda=True,
         why="CUPTI's lists go to the parent from HeldTracing.end, before any idle call: the parent judges its own "
             "copy (the copies refuse device time) and the reply's zeroed lists differ from it (timing samples "
             "edited: GATE_TAMPERED).  Not yet run on CUDA"),
    Case("tracer_drop_records", "host compute while held, the CUPTI tracer's copy-record list rebound to one "
         "that drops every append", "demo", _r(guards.GATE_TAMPERED), "H9 H12", needs_cuda=True,
         why="the worker's tracer is made before the import and watched by the integrity snapshot: the rebound "
             "_copies stops the timed loop after the iteration (GATE_TAMPERED); the buffer callback fills the "
             "record store's own list anyway, and take() reports the swap.  Not yet run on CUDA"),
    Case("eager_refused_idle_unjoined", "refuses device time on purpose (a D2H copy while held), then runs its "
         "40 µs unjoined in the untraced idle calls that time the eager headline", "demo", PASS, "H8", needs_cuda=True,
         min_latency_ms=0.032,
         why="HOLE, narrowed (section 3 item 16): an eager headline below 0.8x its trial's traced kernel time is "
             "PHASE_MISMATCH (guards.eager_kernel_verdict), so it cannot read under 0.032 ms here; the 40 µs hide "
             "inside the idle calls' own host launch path (~80-130 µs in the gate's worker on the H200), which the "
             "events time anyway: PASS with the launch path, ~the kernel's tail (launch + 40 µs - host path) "
             "below the honest eager latency.  Not yet run on CUDA"),
    Case("host_compute_held", "computes on the host while the stream is held (copy engines)", "demo", PASS, "H9",
         needs_cuda=True, min_latency_ms=0.02,
         why="CUPTI sees the device-to-host copy: the headline is the eager latency, host work included"),
    Case("sync_in_call", "honest, but waits for the device inside the call", "demo", PASS, "",
         needs_cuda=True,
         why="the hold's time limit ends the wait; the iteration is timed eagerly and labelled"),
]

BY_ID: Dict[str, Case] = {c.id: c for c in CASES}


def get_case(case_id: str) -> Case:
    try:
        return BY_ID[case_id]
    except KeyError:
        raise KeyError(f"unknown red-team case {case_id!r} (known: {', '.join(BY_ID)})") from None
