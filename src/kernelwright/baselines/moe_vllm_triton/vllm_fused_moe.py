"""Import vLLM 0.20.0's Triton fused-MoE path from the wheel's own files, nothing copied.

The files listed in ``wheel_files.py`` (extracted by ``scripts/fetch-vllm-moe.sh`` into a folder
whose ``vllm/__init__.py`` is empty) are imported as they are.  What they import but this path
never runs is answered by kernelwright stand-ins put into ``sys.modules`` first:

* packages: ``vllm.model_executor``, ``.layers``, ``.fused_moe`` (its real ``__init__`` imports
  the whole layer; ours only has ``get_config()`` -> None, vLLM's no-override default), ``.router``,
  ``.quantization``, ``.quantization.utils`` and ``vllm.utils``, each with ``__path__`` on the
  extracted folder so the real submodules load from it;
* ``vllm.platforms``: ``current_platform`` with the six members the path calls.  ``is_cuda()`` is
  False: vLLM asks it before calling a compiled kernel (``_C`` ``per_token_group_fp8_quant``,
  ``_moe_C`` ``grouped_topk``) and none is loaded, so vLLM takes its own fallback (its Triton
  quantisation, its torch routing); ``kernel.py`` calls ``fused_grouped_topk`` itself, on vLLM's
  condition, when the routing stand-in op can run;
* ``vllm.logger`` (a plain ``logging`` logger with vLLM's ``*_once`` methods; the real one installs
  a stdout handler), ``vllm.triton_utils`` (the real one turns Triton off when no GPU driver is
  active, which would break the CPU interpreter), ``vllm.utils.torch_utils`` (the real one patches
  ``torch.cuda.set_stream`` at import; the path needs ``direct_register_custom_op``, a no-op here
  since we call the functions directly, never ``torch.ops.vllm.*``, and
  ``is_torch_equal_or_newer``), ``vllm.utils.deep_gemm`` (``is_deep_gemm_e8m0_used``, decided as
  vLLM decides it, without importing DeepGEMM);
* ``vllm._custom_ops``: the compiled ops of ``standin_ops.py``;
* placeholders for names the files import but never call here (base classes of the modular
  kernel classes, LoRA, ROCm, other quantisation schemes): classes that refuse to be created;
* ``torch.compile``, only while the files import: vLLM decorates ``grouped_topk`` and two unused
  helpers with it, and decorating imports ``torch._dynamo``, which replaces ``torch.manual_seed``
  (the gate's integrity check rejects that as tampering), while a compiled call would start
  inductor's worker processes (the gate's child-process guard).  The decorated functions stay
  plain Python, so vLLM's fallback routing runs eagerly.

``load()`` returns the real vLLM functions.  It raises ImportError (one line) when the files are
missing or an import fails; ``availability_reason()`` turns that into the gate's skip reason.
"""

import contextlib
import functools
import importlib
import importlib.machinery
import importlib.util
import logging
import sys
import types
from pathlib import Path

import torch

from . import standin_ops
from .wheel_files import VLLM_VERSION, WHEEL_FILES

FETCH_HINT = "scripts/fetch-vllm-moe.sh"

PACKAGES = (
    "vllm.model_executor",
    "vllm.model_executor.layers",
    "vllm.model_executor.layers.fused_moe",
    "vllm.model_executor.layers.fused_moe.router",
    "vllm.model_executor.layers.quantization",
    "vllm.model_executor.layers.quantization.utils",
    "vllm.utils",
)

# names imported by the loaded files (``from MODULE import NAME``, or attributes of a module
# imported whole) that the Triton fused-MoE path never calls
PLACEHOLDERS = {
    "vllm.model_executor.layers.fused_moe.modular_kernel": (
        "FusedMoEExpertsModular", "FusedMoEActivationFormat", "TopKWeightAndReduce", "ExpertTokensMetadata"),
    "vllm.model_executor.layers.fused_moe.config": (
        "FUSED_MOE_UNQUANTIZED_CONFIG", "FusedMoEConfig", "FusedMoEParallelConfig", "FusedMoEQuantConfig",
        "_get_config_dtype_str", "RoutingMethodType", "get_routing_method_type"),
    "vllm.model_executor.layers.fused_moe.lora_experts_mixin": ("LoRAExpertsMixin",),
    "vllm.model_executor.layers.fused_moe.topk_weight_and_reduce": ("TopKWeightAndReduceNoOP",),
    "vllm.model_executor.layers.fused_moe.rocm_aiter_fused_moe": ("rocm_aiter_grouped_topk",),
    "vllm.model_executor.layers.fused_moe.router.base_router": ("BaseRouter",),
    "vllm.model_executor.layers.fused_moe.router.fused_topk_bias_router": ("fused_topk_bias",),
    "vllm.model_executor.layers.fused_moe.router.fused_topk_router": ("fused_topk",),
    "vllm.model_executor.layers.quantization.utils.int8_utils": ("per_token_group_quant_int8", "per_token_quant_int8"),
    "vllm.model_executor.layers.quantization.utils.mxfp4_utils": ("quant_dequant_mxfp4",),
    "vllm.model_executor.layers.quantization.utils.mxfp6_utils": ("quant_dequant_mxfp6",),
    "vllm.model_executor.layers.quantization.utils.mxfp8_utils": ("mxfp8_e4m3_quantize",),
    "vllm.model_executor.layers.quantization.utils.nvfp4_emulation_utils": ("ref_nvfp4_quant_dequant",),
    "vllm.model_executor.layers.quantization.utils.w8a8_utils": ("all_close_1d", "per_tensor_dequantize"),
    "vllm.model_executor.parameter": (
        "BlockQuantScaleParameter", "ChannelQuantScaleParameter", "PerTensorScaleParameter"),
    "vllm._aiter_ops": ("rocm_aiter_ops",),
    "vllm.distributed": (),
    "vllm.distributed.eplb": (),
    "vllm.distributed.eplb.eplb_state": ("EplbLayerState",),
}


class VllmFusedMoeUnavailable(ImportError):
    """The wheel's files are missing or did not import; the message is one line."""


# --------------------------------------------------------------------------- finding the files
def vllm_roots():
    """Folders of the top-level ``vllm`` package, found without importing it."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def extract_root():
    """The folder holding ``vllm/`` with every file of WHEEL_FILES.

    Raises VllmFusedMoeUnavailable naming the first missing file."""
    roots = vllm_roots()
    if not roots:
        raise VllmFusedMoeUnavailable(f"vllm not importable: run {FETCH_HINT} and put .whl/vllm-extract on PYTHONPATH")
    for root in roots:
        if all((root.parent / f).is_file() for f in WHEEL_FILES):
            return root.parent
    missing = next(f for f in WHEEL_FILES if not (roots[0].parent / f).is_file())
    raise VllmFusedMoeUnavailable(f"vllm {VLLM_VERSION} file {missing} not under {roots[0].parent} "
                                  f"(run {FETCH_HINT})")


# --------------------------------------------------------------------------- stand-ins
def _placeholder(module, name):
    def refuse(cls, *args, **kwargs):
        raise RuntimeError(f"{module}.{name} is a kernelwright stand-in: not on the Triton fused-MoE path")

    return type(name, (), {"__new__": refuse, "__module__": module, "__call__": refuse,
                           "__doc__": f"Stand-in for {module}.{name} (imported, never used here)."})


class _OnceLogger(logging.LoggerAdapter):
    """vLLM's logger API on a plain ``logging`` logger: ``info_once`` etc. log a message once."""

    def __init__(self, name):
        super().__init__(logging.getLogger(name), {})
        self._seen = set()

    def _once(self, level, msg, *args, **kwargs):
        kwargs.pop("scope", None)
        key = (level, msg, args)
        if key not in self._seen:
            self._seen.add(key)
            self.log(level, msg, *args, **kwargs)

    def debug_once(self, msg, *args, **kwargs):
        self._once(logging.DEBUG, msg, *args, **kwargs)

    def info_once(self, msg, *args, **kwargs):
        self._once(logging.INFO, msg, *args, **kwargs)

    def warning_once(self, msg, *args, **kwargs):
        self._once(logging.WARNING, msg, *args, **kwargs)


class StandInPlatform:
    """vLLM's ``current_platform``, reduced to what the Triton fused-MoE path calls."""

    simple_compile_backend = "inductor"  # CudaPlatform's; read by the torch.compile decorators

    @staticmethod
    def is_cuda():
        """False: vLLM's compiled CUDA ops (_C, _moe_C) are not loaded, see the module docstring."""
        return False

    @staticmethod
    def is_rocm():
        return False

    @staticmethod
    def is_fp8_fnuz():
        return False

    @staticmethod
    def fp8_dtype():
        return torch.float8_e4m3fn

    @staticmethod
    def get_device_name(device_id: int = 0):
        """``torch.cuda.get_device_name``, e.g. "NVIDIA H200" (picks the tuned config file)."""
        return torch.cuda.get_device_name(device_id) if torch.cuda.is_available() else "cpu"


class StandInCustomOp(_placeholder("vllm.model_executor.custom_op", "CustomOp")):
    """vLLM's CustomOp base: ``register`` is an identity decorator (``GroupedTopk`` is declared
    with it, never created here)."""

    @classmethod
    def register(cls, name):
        return lambda op_cls: op_cls


def _is_torch_equal_or_newer(target: str) -> bool:
    from packaging.version import Version

    return Version(torch.__version__.split("+")[0]) >= Version(target)


def _direct_register_custom_op(*args, **kwargs):
    """No-op: the baseline calls vLLM's functions directly, never through ``torch.ops.vllm``."""


@functools.lru_cache(maxsize=None)
def _is_deep_gemm_e8m0_used() -> bool:
    """vLLM 0.20's decision (``vllm/utils/deep_gemm.py``), without importing DeepGEMM: UE8M0
    (power-of-two) activation scales when ``VLLM_USE_DEEP_GEMM`` and ``VLLM_USE_DEEP_GEMM_E8M0``
    are on (both default 1), DeepGEMM is importable (the wheel bundles it) and the GPU is sm_90
    or sm_100.  On an H200 with the wheel's DeepGEMM next to it: True."""
    envs = importlib.import_module("vllm.envs")
    if not (envs.VLLM_USE_DEEP_GEMM and envs.VLLM_USE_DEEP_GEMM_E8M0):
        return False
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] not in (9, 10):
        return False
    for name in ("deep_gemm", "vllm.third_party.deep_gemm"):
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except (ImportError, ValueError):
            pass
    return False


def _module(name, attrs=None, path=None):
    mod = types.ModuleType(name, (attrs or {}).pop("__doc__", None))
    mod.__dict__.update(attrs or {})
    if path is not None:
        mod.__path__ = [str(path)]
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        mod.__spec__.submodule_search_locations = [str(path)]
    mod.__kernelwright_standin__ = True
    return mod


def standin_modules(root: Path):
    """Every stand-in module, by name (a dict; nothing is installed)."""
    mods = {}
    for pkg in PACKAGES:
        attrs = {"__doc__": f"kernelwright stand-in package over {root / pkg.replace('.', '/')}"}
        if pkg == "vllm.model_executor.layers.fused_moe":
            attrs["get_config"] = lambda: None
        mods[pkg] = _module(pkg, attrs, path=root / pkg.replace(".", "/"))
    for name, names in PLACEHOLDERS.items():
        attrs = {n: _placeholder(name, n) for n in names}
        path = None if names else root / name.replace(".", "/")  # packages only hold submodules
        mods[name] = _module(name, {"__doc__": f"kernelwright placeholders for {name}", **attrs}, path=path)
    mods["vllm.model_executor.custom_op"] = _module("vllm.model_executor.custom_op", {
        "__doc__": "kernelwright stand-in for CustomOp", "CustomOp": StandInCustomOp})
    mods["vllm.platforms"] = _module("vllm.platforms", {"current_platform": StandInPlatform()})
    mods["vllm.logger"] = _module("vllm.logger", {"init_logger": _OnceLogger, "logger": _OnceLogger("vllm")})
    import triton
    import triton.language as tl

    mods["vllm.triton_utils"] = _module("vllm.triton_utils", {"HAS_TRITON": True, "triton": triton, "tl": tl})
    mods["vllm.utils.torch_utils"] = _module("vllm.utils.torch_utils", {
        "direct_register_custom_op": _direct_register_custom_op,
        "is_torch_equal_or_newer": _is_torch_equal_or_newer})
    mods["vllm.utils.deep_gemm"] = _module("vllm.utils.deep_gemm", {
        "is_deep_gemm_e8m0_used": _is_deep_gemm_e8m0_used,
        "get_tma_aligned_size": _placeholder("vllm.utils.deep_gemm", "get_tma_aligned_size"),
        "transform_sf_into_required_layout": _placeholder("vllm.utils.deep_gemm", "transform_sf_into_required_layout")})
    mods["vllm._custom_ops"] = _module("vllm._custom_ops", {
        "moe_align_block_size": standin_ops.moe_align_block_size,
        "moe_sum": standin_ops.moe_sum,
        "grouped_topk": standin_ops.grouped_topk})
    return mods


@contextlib.contextmanager
def _torch_compile_leaves_functions_alone():
    """While the wheel's files import, ``torch.compile(...)`` returns the function it decorates
    (see the module docstring); the original is back when the block ends."""
    original = torch.compile

    def uncompiled(model=None, **_options):
        return (lambda fn: fn) if model is None else model

    torch.compile = uncompiled
    try:
        yield
    finally:
        torch.compile = original


def _install(mods):
    for name in sorted(mods, key=lambda n: n.count(".")):
        present = sys.modules.get(name)
        if present is not None:
            if getattr(present, "__kernelwright_standin__", False):
                continue  # installed by another copy of this folder in this process: keep it
            raise VllmFusedMoeUnavailable(f"{name} is already imported from {getattr(present, '__file__', '?')}: "
                                          "this baseline loads the wheel's extracted files only")
        sys.modules[name] = mods[name]
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, mods[name])


# --------------------------------------------------------------------------- the real functions
@functools.lru_cache(maxsize=None)
def load():
    """Import the wheel's modules (once) and return them in a namespace:

    ``fused_moe`` (``try_get_optimal_moe_config``, ``_prepare_expert_assignment``,
    ``dispatch_fused_moe_kernel``, ``get_config_file_name``), ``utils`` (``moe_kernel_quantize_input``),
    ``router`` (``grouped_topk``, ``fused_grouped_topk``), ``fp8_utils``, ``envs``, ``ops``
    (the stand-in ``vllm._custom_ops``) and ``root`` (the extract folder).

    Raises VllmFusedMoeUnavailable (one line)."""
    root = extract_root()
    vllm = importlib.import_module("vllm")
    init = getattr(vllm, "__file__", None)
    if init and Path(init).is_file() and Path(init).stat().st_size > 0:
        raise VllmFusedMoeUnavailable(f"{init} is not empty (a full vllm install?): this baseline needs the "
                                      f"extract of {FETCH_HINT}, whose vllm/__init__.py is empty")
    _install(standin_modules(root))
    try:
        names = {
            "fused_moe": "vllm.model_executor.layers.fused_moe.fused_moe",
            "utils": "vllm.model_executor.layers.fused_moe.utils",
            "router": "vllm.model_executor.layers.fused_moe.router.grouped_topk_router",
            "fp8_utils": "vllm.model_executor.layers.quantization.utils.fp8_utils",
            "envs": "vllm.envs",
        }
        with _torch_compile_leaves_functions_alone():
            found = {key: importlib.import_module(mod) for key, mod in names.items()}
    except Exception as exc:  # noqa: BLE001 - one line for the skip reason
        raise VllmFusedMoeUnavailable(f"vllm {VLLM_VERSION} fused_moe import failed: "
                                      f"{type(exc).__name__}: {exc}".replace("\n", " ")) from exc
    found["ops"] = sys.modules["vllm._custom_ops"]
    found["root"] = root
    return types.SimpleNamespace(**found)


def availability_reason():
    """None when ``load()`` works here, else its one-line reason."""
    try:
        load()
    except VllmFusedMoeUnavailable as exc:
        return str(exc)
    return None


__all__ = ["VllmFusedMoeUnavailable", "availability_reason", "extract_root", "load"]
