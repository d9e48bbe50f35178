"""CUDA buffers that the worker shares with the parent as file descriptors, not legacy CUDA IPC.

The worker allocates its input and output buffers and the parent reads them (gate/worker.py).
With torch's default sharing (``cudaIpcGetMemHandle``, "ipc") the parent cannot open the handle
of a worker behind the boundary: on the H200 every CUDA worker behind ``uid`` or ``mount`` died at
its ready message with "CUDA error: mapping of buffer object failed" (docs/gate.md, section 1).
Mode "fd" allocates each message's buffers in one virtual-memory allocation (``cuMemCreate`` with
``CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR``), exports it as a file descriptor, and hands the
descriptor over through the worker's multiprocessing resource sharer, as CPU shared memory already
is (``wire.fetch_fd``: only from this worker's sharer, with a deadline); the parent imports and maps
it (``cuMemImportFromShareableHandle``, ``cuMemMap``) and views the tensors at their offsets.  A
descriptor is passed explicitly, so no uid or namespace check stands in its way (CUDA driver API,
"Virtual Memory Management": shareable handles).  On the H200 (driver 580) the descriptor imports
as another uid and from another PID namespace, where legacy IPC fails
(``experiments/cuda_fd_share_probe.py``, results/h200/2026-12-02-records-4): "fd" is the default
wherever ``cuda.bindings`` imports.

On the wire a message carries ``{CUDA_ALLOCATIONS: {id: {"fd": DupFd, "size": bytes, "device": i}}}``
and, where a tensor was, ``{CUDA_VIEW: id, "offset": bytes, "shape": [...], "dtype": torch.dtype}``
(contiguous views); ``share_tree`` builds that in the worker, ``open_tree`` undoes it in the parent.
"""

from __future__ import annotations

import itertools
import os
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

MODE_ENV = "KERNELWRIGHT_CUDA_SHARING"
MODES = ("ipc", "fd")
CUDA_ALLOCATIONS = "__kw_cuda_allocations__"
CUDA_VIEW = "__kw_cuda_view__"
_ALIGN = 256                      # bytes between views of one allocation
_ids = itertools.count(1)


def sharing_mode(value: Optional[str] = None) -> str:
    """'fd' or 'ipc' (``$KERNELWRIGHT_CUDA_SHARING``); unset: 'fd' where the driver API's Python
    bindings (``cuda.bindings``) import, 'ipc' otherwise.

    Raises:
        ValueError: any other value.
    """
    mode = (value if value is not None else os.environ.get(MODE_ENV, "")).strip().lower() or _default_mode()
    if mode not in MODES:
        raise ValueError(f"{MODE_ENV}={mode!r}: expected one of {', '.join(MODES)}")
    return mode


def _default_mode() -> str:
    """'fd' when ``cuda.bindings`` can be imported (the descriptor path needs the driver API)."""
    import importlib.util

    try:
        return "fd" if importlib.util.find_spec("cuda.bindings") is not None else "ipc"
    except (ImportError, ValueError):   # no ``cuda`` package at all
        return "ipc"


def _driver():
    from cuda.bindings import driver as cu

    return cu


def _check(result, what: str):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else (rest or None)


def _fd_handle_type(cu):
    return cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR


def _properties(cu, device: int):
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    prop.requestedHandleTypes = _fd_handle_type(cu)
    return prop


class _Mapping:
    """One physical allocation mapped at a reserved virtual range of this process; unmapped and
    released when the last tensor viewing it is freed (each view's ``__cuda_array_interface__``
    owner holds a reference)."""

    def __init__(self, handle, size: int, device: int):
        cu = _driver()
        self.size, self.device, self.handle, self.ptr, self.mapped = size, device, handle, None, False
        self.ptr = _check(cu.cuMemAddressReserve(size, 0, 0, 0), "cuMemAddressReserve")
        _check(cu.cuMemMap(self.ptr, size, 0, handle, 0), "cuMemMap")
        self.mapped = True
        access = cu.CUmemAccessDesc()
        access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        access.location.id = device
        access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        _check(cu.cuMemSetAccess(self.ptr, size, [access], 1), "cuMemSetAccess")

    @classmethod
    def allocate(cls, nbytes: int, device: int) -> "_Mapping":
        cu = _driver()
        prop = _properties(cu, device)
        granularity = int(_check(cu.cuMemGetAllocationGranularity(
            prop, cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity"))
        size = max(granularity, -(-nbytes // granularity) * granularity)
        return cls(_check(cu.cuMemCreate(size, prop, 0), "cuMemCreate"), size, device)

    @classmethod
    def import_fd(cls, fd: int, size: int, device: int) -> "_Mapping":
        cu = _driver()
        handle = _check(cu.cuMemImportFromShareableHandle(fd, _fd_handle_type(cu)), "cuMemImportFromShareableHandle")
        return cls(handle, size, device)

    def export_fd(self) -> int:
        cu = _driver()
        return int(_check(cu.cuMemExportToShareableHandle(self.handle, _fd_handle_type(cu), 0),
                          "cuMemExportToShareableHandle"))

    def view(self, offset: int, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """A contiguous tensor ``offset`` bytes into the mapping; it keeps the mapping alive.

        Raises:
            ValueError: the view does not fit in the mapping.
        """
        nbytes = _nbytes(shape, dtype)
        if offset < 0 or offset % _ALIGN or offset + nbytes > self.size:
            raise ValueError(f"a view of {nbytes} bytes at {offset} outside an allocation of {self.size}")
        flat = torch.as_tensor(_ViewOwner(self, int(self.ptr) + offset, nbytes),
                               device=torch.device("cuda", self.device))
        t = flat[:nbytes].view(dtype).reshape(tuple(int(n) for n in shape))
        _MAPPINGS[t.untyped_storage().data_ptr()] = self
        return t

    def __del__(self):
        """Undo what ``__init__`` got to (a failed reserve or map still releases the handle:
        an imported one would otherwise keep the worker's memory alive in the parent)."""
        try:
            cu = _driver()
            if self.mapped:
                cu.cuMemUnmap(self.ptr, self.size)
            if self.ptr is not None:
                cu.cuMemAddressFree(self.ptr, self.size)
            cu.cuMemRelease(self.handle)
        except Exception:   # interpreter shutdown: the process's mappings go with it
            pass


class _ViewOwner:
    """The ``__cuda_array_interface__`` (bytes) that ``torch.as_tensor`` wraps; torch keeps it,
    and so the mapping, alive as long as the tensor."""

    def __init__(self, mapping: _Mapping, address: int, nbytes: int):
        self.mapping = mapping
        self.__cuda_array_interface__ = {"shape": (max(nbytes, 1),), "typestr": "|u1", "data": (address, False),
                                         "version": 3, "strides": None}


def _nbytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    numel = 1
    for n in shape:
        numel *= int(n)
    return numel * torch.empty((), dtype=dtype).element_size()


def allocate_views(specs: Sequence[tuple], device: torch.device) -> List[torch.Tensor]:
    """Worker side: contiguous tensors for ``specs`` ((shape, dtype) pairs) in one shareable
    allocation on ``device``, each ``_ALIGN``-aligned.

    Raises:
        RuntimeError: a driver call failed (no VMM support, out of memory).
    """
    offsets, total = [], 0
    for shape, dtype in specs:
        offsets.append(total)
        total += -(-max(_nbytes(shape, dtype), 1) // _ALIGN) * _ALIGN
    index = device.index if device.index is not None else torch.cuda.current_device()
    mapping = _Mapping.allocate(max(total, 1), index)
    return [mapping.view(off, shape, dtype) for off, (shape, dtype) in zip(offsets, specs)]


def share_tree(obj: Any, dup_fd: Callable[[int], Any]) -> Any:
    """Worker side: ``obj`` (dicts, lists, tuples of tensors and plain values) with every tensor
    made by ``allocate_views`` replaced by a view record (any other CUDA tensor is an error), and the allocations listed under
    ``CUDA_ALLOCATIONS`` in the top-level dict (``dup_fd(fd)``: the resource sharer's ``DupFd``,
    which keeps its own copy of the descriptor, so the exported one is closed here).

    Raises:
        ValueError: a CUDA tensor that no shareable allocation holds.
    """
    allocations: Dict[int, Dict[str, Any]] = {}
    ids: Dict[int, int] = {}

    def record(t: torch.Tensor) -> Dict[str, Any]:
        mapping = _MAPPINGS.get(t.untyped_storage().data_ptr())
        if mapping is None:
            raise ValueError("a CUDA tensor outside the worker's shareable allocations")
        key = id(mapping)
        if key not in ids:
            ids[key] = next(_ids)
            fd = mapping.export_fd()
            try:
                allocations[ids[key]] = {"fd": dup_fd(fd), "size": mapping.size, "device": mapping.device}
            finally:
                os.close(fd)
        return {CUDA_VIEW: ids[key], "offset": t.data_ptr() - int(mapping.ptr),
                "shape": list(t.shape), "dtype": t.dtype}

    def leaf(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and (x.is_cuda or x.untyped_storage().data_ptr() in _MAPPINGS):
            return record(x)
        return _KEEP

    out = _map_tree(obj, leaf)
    if allocations and isinstance(out, dict):
        out[CUDA_ALLOCATIONS] = allocations
    return out


class UnexpectedDescriptors(ValueError):
    """A worker message carried CUDA descriptors it should not: any while the run shares CUDA
    buffers by "ipc", or more than one allocation (an honest worker allocates each message's
    buffers in one; two descriptors of one allocation would map the same memory at two addresses,
    aliasing buffers that the parent's address checks see apart)."""


def open_tree(obj: Any, fetch_fd: Callable[[Any], int], mode: Optional[str] = None) -> Any:
    """Parent side: undo ``share_tree``.  ``fetch_fd(df)`` turns a ``DupFd`` into a descriptor
    (``wire.fetch_fd``: this worker's sharer only, with a deadline); ``mode``: the run's
    ``sharing_mode`` (default: read now).

    Raises:
        UnexpectedDescriptors: descriptors in a message of an "ipc" run, or more than one
            allocation in a message (only a forged message has them).
        ValueError: a view record that names no allocation of the message, or lies outside it.
        RuntimeError: a driver call failed (the descriptor is not a CUDA allocation).
    """
    if not isinstance(obj, dict) or CUDA_ALLOCATIONS not in obj:
        return obj
    if sharing_mode(mode) != "fd":
        raise UnexpectedDescriptors("a worker message carried CUDA descriptors, but CUDA buffers are shared by \"ipc\"")
    allocations = dict(obj.pop(CUDA_ALLOCATIONS))
    if len(allocations) > 1:
        raise UnexpectedDescriptors(f"a worker message carried {len(allocations)} CUDA allocations, not one")
    mappings: Dict[int, _Mapping] = {}
    for key, alloc in allocations.items():
        fd = fetch_fd(alloc["fd"])
        try:
            mappings[key] = _Mapping.import_fd(fd, int(alloc["size"]), int(alloc["device"]))
        finally:
            os.close(fd)

    def leaf(x: Any) -> Any:
        if isinstance(x, dict) and CUDA_VIEW in x:
            mapping = mappings.get(x[CUDA_VIEW])
            if mapping is None:
                raise ValueError(f"a CUDA view of allocation {x[CUDA_VIEW]!r}, which the message does not carry")
            return mapping.view(int(x["offset"]), [int(n) for n in x["shape"]], x["dtype"])
        return _KEEP

    return _map_tree(obj, leaf)


_KEEP = object()   # what a leaf function returns to let ``_map_tree`` descend


def _map_tree(obj: Any, leaf: Callable[[Any], Any]) -> Any:
    """``obj`` rebuilt with ``leaf(x)`` in place of every node where it does not return
    ``_KEEP``; dicts, lists and tuples are descended otherwise."""
    done = leaf(obj)
    if done is not _KEEP:
        return done
    if isinstance(obj, dict):
        return {k: _map_tree(v, leaf) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tree(v, leaf) for v in obj)
    return obj


# storage data pointer -> the mapping that holds it (filled by _Mapping.view; an entry goes when
# the last view of its mapping is freed)
_MAPPINGS: "weakref.WeakValueDictionary[int, _Mapping]" = weakref.WeakValueDictionary()
