"""Does a CUDA buffer cross the gate's boundary when it is exported as a POSIX file descriptor?
(issue 22; docs/gate.md, section 1: the boundary does not start a CUDA worker today, because the
parent cannot open the worker's legacy CUDA IPC handle across the uid change.)

Run as root on the GPU machine: ``python3 experiments/cuda_fd_share_probe.py``.  For each way of
starting the child (same uid; another uid by setpriv; another uid in its own PID and mount
namespace, the boundary's ``full`` level), the child allocates

* a VMM buffer (``cuMemCreate`` with ``CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR``), fills it with
  7.0 and sends its descriptor over a Unix socket (``SCM_RIGHTS``), and
* a torch tensor shared the legacy way (``torch.multiprocessing.reductions.reduce_tensor``:
  ``cudaIpcGetMemHandle``), its rebuild arguments pickled over the same socket.

The parent maps the descriptor (``cuMemImportFromShareableHandle``, ``cuMemMap``), checks the
7.0s, writes 3.0 back (the child checks them), then rebuilds the legacy tensor.  One line per
step: ``<mode> <step>: ok`` or the error.  Exit status 0 whatever the outcome: it is a probe.
"""

import os
import pickle
import shutil
import socket
import struct
import subprocess
import sys

N = 1 << 20          # float32 elements (4 MiB)


def _check(result, what):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"{what}: {err}")
    return rest[0] if len(rest) == 1 else rest


def _driver():
    from cuda.bindings import driver as cu

    return cu


def _access(cu, device: int):
    desc = cu.CUmemAccessDesc()
    desc.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    desc.location.id = device
    desc.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    return desc


def _size(cu, device: int) -> int:
    prop = _prop(cu, device)
    gran = _check(cu.cuMemGetAllocationGranularity(
        prop, cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity")
    return -(-N * 4 // int(gran)) * int(gran)


def _prop(cu, device: int):
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    prop.requestedHandleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    return prop


def _map(cu, handle, size: int, device: int):
    ptr = _check(cu.cuMemAddressReserve(size, 0, 0, 0), "cuMemAddressReserve")
    _check(cu.cuMemMap(ptr, size, 0, handle, 0), "cuMemMap")
    _check(cu.cuMemSetAccess(ptr, size, [_access(cu, device)], 1), "cuMemSetAccess")
    return ptr


def _as_tensor(ptr):
    import torch

    class View:
        __cuda_array_interface__ = {"shape": (N,), "typestr": "<f4", "data": (int(ptr), False), "version": 3}

    return torch.as_tensor(View(), device="cuda")


def _send(sock: socket.socket, payload: bytes, fds=()) -> None:
    socket.send_fds(sock, [struct.pack("!I", len(payload)) + payload], list(fds))


def _recv(sock: socket.socket):
    data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 4)
    size = struct.unpack("!I", data[:4])[0]
    while len(data) < 4 + size:
        data += sock.recv(4 + size - len(data))
    return data[4:4 + size], fds


def child(fd: int) -> None:
    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    sock = socket.socket(fileno=fd)
    torch.cuda.init()
    torch.empty(1, device="cuda")
    cu, device = _driver(), torch.cuda.current_device()
    try:
        size = _size(cu, device)
        handle = _check(cu.cuMemCreate(size, _prop(cu, device), 0), "cuMemCreate")
        ptr = _map(cu, handle, size, device)
        view = _as_tensor(ptr)
        view.fill_(7.0)
        torch.cuda.synchronize()
        exported = _check(cu.cuMemExportToShareableHandle(
            handle, cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle")
        _send(sock, pickle.dumps(("vmm", size)), [int(exported)])
    except Exception as exc:
        view = None
        _send(sock, pickle.dumps(("vmm-error", f"{type(exc).__name__}: {exc}")))
    legacy = torch.full((4,), 7.0, device="cuda")
    fn, args = reduce_tensor(legacy)
    _send(sock, pickle.dumps(("legacy", fn.__name__, args)))
    _recv(sock)                                      # the parent is done
    if view is not None:
        torch.cuda.synchronize()
        print(f"child (uid {os.getuid()}) sees the parent's 3.0: {bool((view == 3.0).all())}", flush=True)


def parent(mode: str, prefix) -> None:
    import torch
    from torch.multiprocessing import reductions

    torch.empty(1, device="cuda")
    cu, device = _driver(), torch.cuda.current_device()
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = dict(os.environ, HOME="/tmp")
    proc = subprocess.Popen(prefix + [sys.executable, os.path.abspath(__file__), "--child", str(theirs.fileno())],
                            pass_fds=[theirs.fileno()], env=env)
    theirs.close()
    try:
        payload, fds = _recv(mine)
        message = pickle.loads(payload)
        if message[0] == "vmm":
            try:
                handle = _check(cu.cuMemImportFromShareableHandle(
                    fds[0], cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), "cuMemImportFromShareableHandle")
                view = _as_tensor(_map(cu, handle, message[1], device))
                print(f"{mode} vmm fd import: ok, values 7.0: {bool((view == 7.0).all())}", flush=True)
                view.fill_(3.0)
                torch.cuda.synchronize()
            except Exception as exc:
                print(f"{mode} vmm fd import: {type(exc).__name__}: {exc}", flush=True)
        else:
            print(f"{mode} vmm export in the child: {message[1]}", flush=True)
        payload, _ = _recv(mine)
        _, name, args = pickle.loads(payload)
        try:
            t = getattr(reductions, name)(*args)
            print(f"{mode} legacy CUDA IPC: ok, values 7.0: {bool((t == 7.0).all())}", flush=True)
        except Exception as exc:
            print(f"{mode} legacy CUDA IPC: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}", flush=True)
        _send(mine, b"done")
        proc.wait(timeout=60)
    except Exception as exc:
        print(f"{mode}: probe failed: {type(exc).__name__}: {exc}", flush=True)
        proc.kill()


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(int(sys.argv[2]))
        return
    import torch

    if not torch.cuda.is_available():
        print("cuda_fd_share_probe: needs a CUDA device")
        return
    uid = 1_500_000_099
    drop = [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    namespaces = [shutil.which("unshare") or "unshare", "--mount", "--pid", "--fork", "--kill-child=SIGKILL",
                  "--mount-proc", "--"]
    for mode, prefix in (("same-uid", []), ("other-uid", drop), ("other-uid+pid-ns", namespaces + drop)):
        parent(mode, prefix)


if __name__ == "__main__":
    main()
