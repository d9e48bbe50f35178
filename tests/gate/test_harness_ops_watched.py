"""Every aten operator the worker's own window runs (input regeneration, poisoning, the poison
check) is among the dispatcher entries the integrity snapshot compares (red-team pass rt19: the
regeneration's ``torch.randn(..., generator=g)`` is ``aten::randn.generator``, and the check's
``bool()`` is ``aten::_local_scalar_dense``, neither of which was watched)."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelwright import definitions
from kernelwright.gate import fresh, integrity, worker


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.add(func._schema.name + ("." + func._overloadname if func._overloadname != "default" else ""))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", ["demo", "moe", "attention", "indexer"])
def test_window_ops_are_watched(name):
    builtin = definitions.resolve(name)
    workload = builtin.quick_workloads()[0]
    device = torch.device("cpu")
    mode = _Ops()
    with mode:
        new = fresh.expand(builtin, workload, 12345, device)
        outs = [torch.empty(4, 8, dtype=torch.bfloat16), torch.empty(4, dtype=torch.int32)]
        worker.poison(outs)
        with torch._C.DisableTorchFunctionSubclass():
            for t in outs:
                held = torch.isnan(t).all() if t.is_floating_point() else torch.eq(t, worker.INT_POISON[0]).all()
                bool(held)
    watched = set(integrity._harness_ops())
    assert new
    missing = sorted(mode.seen - watched)
    assert missing == [], missing
