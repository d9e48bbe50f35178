"""Trusted baseline solutions built on public libraries (DeepGEMM, FlashMLA, FlashInfer, vLLM's
Triton MoE), one solution folder each, for side-by-side timing with kernelwright's own kernels on
Hopper.

``all_baselines(definition_name)`` lists them as ``BaselineEntry``: the packed Solution, a human
label, a ``kind`` ("complete": a full implementation that must pass the gate; "lower_bound":
timing only, e.g. the GEMMs alone, never claimed correct) and ``availability()`` (None, or a
one-line reason it cannot run here, found without importing the heavy packages).

A baseline may declare ``"prepare": "kernel.py::prepare"`` in its manifest: the gate calls
``prepare(*inputs) -> state`` once per input set outside the timed region, then
``run(*inputs, *outputs, state=state)`` (DPS) or ``run(*inputs, state=state)``.  Only these
trusted baselines get a ``prepare``; see docs/baselines.md for what each one leaves untimed.

Folder sources import torch, triton and the baseline's library only, and reach sibling files
through relative imports, like any solution.  Two variants of one recipe (the same calls, with
some set-up timed or moved to ``prepare``) share one folder and one ``kernel.py`` with an entry
point each: ``manifest.json`` is the baseline named after the folder, ``manifest.SUFFIX.json`` the
one named ``<folder>_SUFFIX``; the gate packs the same sources for both.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from kernelwright.solutions import load_solution_folder
from kernelwright.trace import Solution

BASELINES_ROOT = Path(__file__).parent
KINDS = ("complete", "lower_bound")


# --------------------------------------------------------------------------- availability
def _vllm_roots() -> List[Path]:
    """Folders of the top-level ``vllm`` package (the full wheel or the device-wheels extract),
    found without importing it (the vLLM baseline's own finder)."""
    from kernelwright.baselines.moe_vllm_triton.vllm_fused_moe import vllm_roots

    return vllm_roots()


def _top_level(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _has_deep_gemm() -> bool:
    return any((r / "third_party" / "deep_gemm" / "__init__.py").is_file() for r in _vllm_roots()) \
        or _top_level("deep_gemm")


def _has_flashmla() -> bool:
    for root in _vllm_roots():
        if (root / "third_party" / "flashmla" / "flash_mla_interface.py").is_file() and \
                any(root.glob("_flashmla_C*.so")):
            return True
    return _top_level("flash_mla")


def _find_nvcc() -> Optional[str]:
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and Path(home, "bin", "nvcc").is_file():
            return str(Path(home, "bin", "nvcc"))
    found = shutil.which("nvcc")
    if found:
        return found
    return "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").is_file() else None


def _gpu_reason(allowed_majors: Tuple[int, ...], what: str) -> Optional[str]:
    import torch  # already a dependency of everything here; cheap next to the packages above

    if not torch.cuda.is_available():
        return "no CUDA device"
    major, minor = torch.cuda.get_device_capability()
    if major not in allowed_majors:
        return f"needs {what}, found sm_{major}{minor} ({torch.cuda.get_device_name()})"
    return None


def _requirement_reason(req: str) -> Optional[str]:
    if req == "deep_gemm":
        return None if _has_deep_gemm() else (
            "DeepGEMM not importable: neither vllm.third_party.deep_gemm (vllm 0.20.0 wheel, "
            "../shared/tools/device-wheels --baselines) nor deep_gemm")
    if req == "flashmla":
        return None if _has_flashmla() else (
            "FlashMLA not importable: neither vllm.third_party.flashmla + vllm/_flashmla_C "
            "(vllm 0.20.0 wheel) nor flash_mla")
    if req == "flashinfer":
        missing = [m for m in ("flashinfer", "tvm_ffi") if not _top_level(m)]
        return None if not missing else (
            f"{' and '.join(missing)} not importable (flashinfer-python 0.6.13 + apache-tvm-ffi)")
    if req == "vllm_fused_moe":
        # imports the wheel's extracted files with their stand-ins (pure Python and Triton, no
        # compiled vLLM code): a failure is the baseline's skip reason
        from kernelwright.baselines.moe_vllm_triton.vllm_fused_moe import availability_reason

        return availability_reason()
    if req == "nvcc":
        return None if _find_nvcc() else "nvcc not found (DeepGEMM compiles its kernels at run time)"
    if req == "hopper":
        return _gpu_reason((9,), "a Hopper GPU (sm_90)")
    if req == "hopper_or_blackwell":
        return _gpu_reason((9, 10), "a Hopper or Blackwell GPU (sm_90/sm_100)")
    return f"unknown requirement {req!r} in the manifest"


# --------------------------------------------------------------------------- entries
@dataclass(frozen=True)
class LoadedBaseline:
    """The callables of a baseline, imported."""

    run: Callable[..., Any]
    prepare: Optional[Callable[..., Any]]
    destination_passing_style: bool
    module: Any


@dataclass(frozen=True)
class BaselineEntry:
    key: str  # folder name under kernelwright/baselines, + "_SUFFIX" for manifest.SUFFIX.json
    folder: Path
    solution: Solution
    label: str
    kind: str  # "complete" | "lower_bound"
    prepare_entry: Optional[str] = None  # "kernel.py::prepare"
    requires: Tuple[str, ...] = ()
    optional: Tuple[str, ...] = ()
    manifest: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    manifest_file: str = "manifest.json"

    @property
    def definition(self) -> str:
        return self.solution.definition

    @property
    def destination_passing_style(self) -> bool:
        return self.solution.spec.destination_passing_style

    @property
    def prepare_symbol(self) -> Optional[str]:
        """The prepare function's name, which lives in the entry file (what the gate's worker
        looks up on the imported entry module), or None."""
        if not self.prepare_entry:
            return None
        file, symbol = self.prepare_entry.split("::")
        if file != self.solution.spec.entry_file:
            raise ValueError(f"{self.key}: prepare must live in the entry file {self.solution.spec.entry_file}")
        return symbol

    @property
    def role(self) -> str:
        """The gate's bench role: "baseline" (complete) or "lower_bound"."""
        return "lower_bound" if self.kind == "lower_bound" else "baseline"

    def availability(self) -> Optional[str]:
        """None when it can run here, else ONE line saying why not (first unmet requirement)."""
        for req in self.requires:
            reason = _requirement_reason(req)
            if reason:
                return " ".join(reason.split())
        return None

    def _module_name(self, entry: str) -> str:
        file = entry.split("::")[0]
        return f"{__name__}.{self.folder.name}.{file[:-3].replace('/', '.')}"

    def load(self) -> LoadedBaseline:
        """Import the entry point (and prepare) from the installed package.

        Raises:
            ImportError: the module or one of its imports is missing.
            AttributeError: the manifest names a function the module lacks.
        """
        entry = self.solution.spec.entry_point
        module = importlib.import_module(self._module_name(entry))
        run = getattr(module, entry.split("::")[1])
        prepare = None
        if self.prepare_entry:
            pmod = importlib.import_module(self._module_name(self.prepare_entry))
            prepare = getattr(pmod, self.prepare_entry.split("::")[1])
        return LoadedBaseline(run=run, prepare=prepare,
                              destination_passing_style=self.destination_passing_style, module=module)


def _load_entry(folder: Path, manifest_file: str = "manifest.json") -> BaselineEntry:
    meta = json.loads((folder / manifest_file).read_text())
    kind = meta.get("kind", "complete")
    if kind not in KINDS:
        raise ValueError(f"{folder}/{manifest_file}: kind must be one of {KINDS}, got {kind!r}")
    prepare = meta.get("prepare")
    if prepare is not None and prepare.count("::") != 1:
        raise ValueError(f"{folder}/{manifest_file}: prepare must look like 'file.py::function'")
    return BaselineEntry(
        key=_key(folder, manifest_file), folder=folder,
        solution=load_solution_folder(folder, manifest_file),
        label=meta.get("label", meta["name"]), kind=kind, prepare_entry=prepare,
        requires=tuple(meta.get("requires", ())), optional=tuple(meta.get("optional", ())),
        manifest=meta, manifest_file=manifest_file)


def _key(folder: Path, manifest_file: str) -> str:
    """``manifest.json``: the folder's name; ``manifest.SUFFIX.json``: ``<folder>_SUFFIX``."""
    suffix = manifest_file[len("manifest."):-len(".json")]
    return folder.name + (f"_{suffix}" if suffix else "")


def _manifests() -> List[Path]:
    """Every baseline's manifest (each folder's manifest.json and manifest.SUFFIX.json), by key."""
    found = [m for m in BASELINES_ROOT.glob("*/manifest*.json")
             if m.name == "manifest.json" or (m.name.startswith("manifest.") and m.name.count(".") == 2)]
    return sorted(found, key=lambda m: _key(m.parent, m.name))


def _all_entries() -> List[BaselineEntry]:
    return [_load_entry(m.parent, m.name) for m in _manifests()]


def _resolve(definition_name: str) -> str:
    """Full definition name for a full name or a short alias (``moe``/``indexer``/``attention``)."""
    try:
        from kernelwright.definitions import get

        return get(definition_name).name
    except Exception:
        return definition_name


def all_baselines(definition_name: Optional[str] = None) -> List[BaselineEntry]:
    """Baselines for one definition (full name or short alias), or all of them.  Reduced-size
    ``__quick`` variants have none: the libraries are called at the real sizes."""
    entries = _all_entries()
    if definition_name is None:
        return entries
    name = _resolve(definition_name)
    return [e for e in entries if e.definition == name]


def catalogue() -> List[Tuple[str, str, str]]:
    """(key, label, definition) of every baseline, read from the manifests alone (no solution is
    packed and nothing heavy imported: ``kernelwright bench --help`` lists them)."""
    out = []
    for manifest in _manifests():
        key = _key(manifest.parent, manifest.name)
        meta = json.loads(manifest.read_text())
        out.append((key, meta.get("label", meta.get("name", key)), meta.get("definition", "")))
    return out


def get_baseline(key: str) -> BaselineEntry:
    """One baseline by key (its folder's name, or ``<folder>_SUFFIX``).  Raises KeyError with the known names."""
    for e in _all_entries():
        if e.key == key:
            return e
    raise KeyError(f"unknown baseline {key!r} (known: {', '.join(e.key for e in _all_entries())})")


__all__ = ["BaselineEntry", "LoadedBaseline", "KINDS", "all_baselines", "catalogue", "get_baseline"]
