"""Fixed workload inputs: tensors a workload takes from a safetensors file (``"type": "safetensors"``).

FlashInfer-Bench keeps these fixed across trials and timed iterations (only random inputs are
re-drawn); so does the gate: ``with_fixed_inputs(builtin, root)`` wraps a definition's
``make_inputs`` so that every safetensors input of a workload is the file's tensor, whatever the
seed, while random inputs keep being drawn from the generator.  ``gate/fresh.py`` therefore never
changes a fixed input in a twin (``fixed_names``), and the parent's checks of sampled iterations
see the same fixed tensors the worker used.

Paths are relative to ``root`` (the TraceSet root, or the folder of a workload file; upstream
writes ``./blob/workloads/...``).  Every problem is one line and raises ``WorkloadInputError``
(the gate turns it into a non-PASSED trace for that workload, reason ``WORKLOAD_INPUT``, and the
run goes on): a missing file, a missing tensor key, a shape or dtype other than the definition's,
a file that changed since the run pinned it.

Pinning: ``pin_workloads`` records each file's SHA-256 in the workload (``SafetensorsInput.sha256``)
before any solution runs; loading checks it, so a solution that rewrites a blob (to make the
problem easier for itself) cannot change what the trusted parent computes its references on.
Each definition object loads a file once (its own cache) and hands out copies.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

import torch

from kernelwright.definitions.base import WorkloadProblem
from kernelwright.trace import Definition, SafetensorsInput, Workload, torch_dtype

BLOBS_SEPARATOR = "|blobs="


class WorkloadInputError(WorkloadProblem):
    """A workload's input cannot be had as the definition says (one line, naming the file)."""


def fixed_names(workload: Workload) -> List[str]:
    """The names of a workload's safetensors (fixed) inputs."""
    return [n for n, spec in workload.inputs.items() if isinstance(spec, SafetensorsInput)]


def blob_path(spec: SafetensorsInput, root: Optional[Path]) -> Path:
    """Where a safetensors input's file is: ``spec.path`` itself when absolute, else under ``root``
    (or the working directory without one), as flashinfer-bench resolves it."""
    path = Path(spec.path)
    if path.is_absolute() or root is None:
        return path
    return Path(root) / path


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pin_workloads(workloads: Iterable[Workload], root: Optional[Path]) -> List[Workload]:
    """The workloads with each existing safetensors file's SHA-256 recorded in its input spec (a
    missing file stays unpinned: loading it reports the problem)."""
    digests: Dict[Path, str] = {}
    out = []
    for w in workloads:
        inputs = dict(w.inputs)
        for name in fixed_names(w):
            spec = inputs[name]
            path = blob_path(spec, root)
            if not path.is_file():
                continue
            if path not in digests:
                digests[path] = file_sha256(path)
            inputs[name] = spec.model_copy(update={"sha256": digests[path]})
        out.append(w.model_copy(update={"inputs": inputs}))
    return out


def referenced_files(workloads: Iterable[Workload], root: Optional[Path]) -> List[str]:
    """Absolute paths of every file the workloads' safetensors inputs name (for FILE_TAMPERED)."""
    return sorted({str(blob_path(w.inputs[n], root).resolve()) for w in workloads for n in fixed_names(w)})


Cache = Dict[Tuple[str, str, Optional[str]], torch.Tensor]


def _load_tensor(path: Path, key: str, sha256: Optional[str], shown: str, cache: Cache) -> torch.Tensor:
    """The CPU tensor ``key`` of a safetensors file (``cache``: what this definition object loaded
    already; ``shown``: the file as the messages name it).  Raises WorkloadInputError.

    In the worker this runs between timed iterations, where a solution's code must not run: the
    cache is the definition object's own plain dict (never a module global another module could
    replace), and only plain tensors come out of it (``type(...) is``, so no subclass hook runs)."""
    from safetensors import SafetensorError, safe_open

    if type(cache) is not dict:
        raise WorkloadInputError(f"{shown}: the fixed-input cache was replaced")
    cache_key = (str(path), str(key), sha256)
    if cache_key in cache:
        found = cache[cache_key]
        if type(found) is not torch.Tensor:
            raise WorkloadInputError(f"{shown}: the fixed-input cache holds a {type(found).__name__}")
        return found
    if not path.is_file():
        raise WorkloadInputError(f"{shown}: safetensors file not found")
    if sha256 is not None and file_sha256(path) != sha256:
        raise WorkloadInputError(f"{shown}: changed since the run pinned it (sha256 {sha256[:12]}...): "
                                 "a solution may have rewritten it")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as fh:
            if key not in fh.keys():
                known = ", ".join(sorted(fh.keys())[:8]) or "none"
                raise WorkloadInputError(f"{shown}: no tensor {key!r} in the file (it has: {known})")
            tensor = fh.get_tensor(key)
    except SafetensorError as exc:
        with open(path, "rb") as fh:
            lfs = fh.read(40).startswith(b"version https://git-lfs")
        if lfs:
            raise WorkloadInputError(f"{shown}: a Git LFS pointer, not the file: run git lfs pull") from exc
        raise WorkloadInputError(f"{shown}: not a readable safetensors file ({exc})") from exc
    if type(tensor) is not torch.Tensor:
        raise WorkloadInputError(f"{shown}: safetensors returned a {type(tensor).__name__}")
    cache[cache_key] = tensor
    return tensor


def load_fixed(definition: Definition, workload: Workload, root: Optional[Path],
               device: torch.device, cache: Optional[Cache] = None) -> Dict[str, torch.Tensor]:
    """Every safetensors input of ``workload`` as a fresh copy on ``device``, checked against the
    definition's shape (for this workload's axes) and dtype; ``cache`` keeps each file's tensors
    for the next call (one per definition object).  Raises WorkloadInputError."""
    cache = {} if cache is None else cache
    out: Dict[str, torch.Tensor] = {}
    for name in fixed_names(workload):
        spec = workload.inputs[name]
        if name not in definition.inputs:
            raise WorkloadInputError(f"workload {workload.uuid}: input {name!r} is not an input of {definition.name}")
        path = blob_path(spec, root)
        shown = f"input {name!r} of workload {workload.uuid}: {spec.path}" + (
            f" (under {root})" if root is not None and not Path(spec.path).is_absolute() else "")
        tensor = _load_tensor(path, spec.tensor_key, spec.sha256, shown, cache)
        want_shape = definition.shape_of(name, workload.axes)
        want_dtype = torch_dtype(definition.inputs[name].dtype)
        if want_shape is None:
            raise WorkloadInputError(f"{shown}: {name!r} is a scalar of {definition.name}, not a tensor")
        if tuple(tensor.shape) != tuple(want_shape):
            raise WorkloadInputError(f"{shown}: tensor {spec.tensor_key!r} has shape {list(tensor.shape)}, "
                                     f"the definition wants {list(want_shape)}")
        if tensor.dtype != want_dtype:
            raise WorkloadInputError(f"{shown}: tensor {spec.tensor_key!r} is {tensor.dtype}, "
                                     f"the definition wants {want_dtype}")
        with torch._C.DisableTorchFunctionSubclass():
            out[name] = torch.Tensor.to(tensor, device=device, copy=True)
    return out


def with_fixed_inputs(builtin, root: Optional[Path]):
    """``builtin`` with every safetensors input of a workload taken from its file under ``root``
    (random inputs, scalars and the definition's own synthesis unchanged).  Its locator is the
    inner one with ``|blobs=<root>`` appended, so the worker's ``definitions.resolve`` builds the
    same thing.  ``builtin`` must not be wrapped already."""
    if builtin.blob_root is not None:
        raise ValueError(f"{builtin.name}: fixed inputs are wrapped already")
    root = Path(root).resolve() if root is not None else None
    inner = builtin.make_inputs
    cache: Cache = {}

    def make_inputs(definition: Definition, workload: Workload, gen: torch.Generator,
                    device: torch.device) -> Dict[str, Any]:
        values = inner(definition, workload, gen, device)
        if fixed_names(workload):
            values.update(load_fixed(definition, workload, root, device, cache))
        return values

    return dataclasses.replace(builtin, make_inputs=make_inputs, blob_root=str(root) if root else "",
                               ref=builtin.locator + BLOBS_SEPARATOR + (str(root) if root else ""))


def split_locator(locator: str) -> Tuple[str, Optional[str]]:
    """(inner locator, blob root or None) of a locator that may end in ``|blobs=<root>``."""
    inner, sep, root = locator.rpartition(BLOBS_SEPARATOR)
    if not sep:
        return locator, None
    return inner, root
