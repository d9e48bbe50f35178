"""The host-op profile (gate/aten_ops.py): what it reports, what it cannot be made to miss."""
import types

import pytest
import torch

from kernelwright.gate import aten_ops


class _Tampered(Exception):
    pass


def _profile(body):
    records = []
    with aten_ops.AtenOpProfile(lambda *r: records.append(r), _Tampered):
        body()
    return {name: elements for name, _, elements in records}


def test_reports_compute_with_its_elements_and_leaves_glue_out():
    x = torch.randn(8, 16)
    seen = _profile(lambda: torch.exp(x.clone().view(16, 8)))
    assert seen.get("aten::exp") == 128
    assert not {"aten::clone", "aten::view", "aten::empty_like", "aten::copy_"} & set(seen)


def test_sees_what_a_torch_function_mode_cannot():
    x = torch.randn(8, 16)

    def callback(v):
        torch.tanh(x)
        return v

    class Backward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            torch.sigmoid(x)
            return g

    def body():
        torch.zeros(1).apply_(callback)
        a = torch.zeros(1, requires_grad=True)
        torch.autograd.grad(Backward.apply(a).sum(), a)
        with torch._C.DisableTorchFunction():
            torch.exp(x)

    seen = _profile(body)
    assert {"aten::tanh", "aten::sigmoid", "aten::exp"} <= set(seen)
    assert seen["aten::tanh"] == 128


def test_a_profile_stopped_in_the_body_is_tampering():
    with pytest.raises(_Tampered):
        _profile(lambda: aten_ops._DISABLE())


def test_a_profile_restarted_in_the_body_is_tampering():
    def restart():
        aten_ops._DISABLE()
        config, activities = aten_ops._config(), {torch._C._profiler.ProfilerActivity.CPU}
        aten_ops._PREPARE(config, activities)
        aten_ops._ENABLE(config, activities)

    with pytest.raises(_Tampered):
        _profile(restart)


def test_the_body_s_own_exception_is_not_hidden_by_the_check():
    def fails():
        aten_ops._DISABLE()
        raise ValueError("the solution's own error")

    with pytest.raises(ValueError):
        _profile(fails)


def test_seal_controls_replaces_every_switch_by_a_refusal():
    fake = types.SimpleNamespace(**{name: (lambda *a: "called") for name in aten_ops._CONTROLS})
    aten_ops.seal_controls([fake])
    for name in aten_ops._CONTROLS:
        with pytest.raises(RuntimeError, match="controls are the gate's"):
            getattr(fake, name)(False)


def test_an_op_on_tensor_lists_is_a_compute_op_but_index_lists_are_not():
    x, g = [torch.randn(8, 16)], [torch.randn(8, 16)]
    y, idx = torch.zeros(8), torch.tensor([1, 3])

    def body():
        torch.ops.aten._fused_sgd_(x, g, [], weight_decay=0.0, momentum=0.0, lr=-1.0, dampening=0.0,
                                   nesterov=False, maximize=False, is_first_step=True)
        y.index_put_((idx,), torch.ones(2))

    seen = _profile(body)
    assert "aten::tensor_list._fused_sgd_" in seen
    assert "aten::index_put_" in seen
    from kernelwright.gate import guards
    reason, _ = guards.cpu_provenance_verdict({"triton::k": [1, 1.0]}, {n: [1, 1.0, e] for n, e in seen.items()}, 128)
    assert reason == guards.VENDOR_KERNELS


def test_a_gather_is_reported_with_its_table_s_elements():
    table = torch.arange(4096.0)
    codes = torch.randint(0, 4096, (8,))
    seen = _profile(lambda: (table[codes], torch.index_select(table, 0, codes)))
    assert seen.get("aten::lookup.index") == 4096
    assert seen.get("aten::lookup.index_select") == 4096


def test_an_op_on_a_nested_tensor_is_a_compute_op():
    parts = [torch.randn(3), torch.randn(5)]
    seen = _profile(lambda: torch.nested.nested_tensor(parts).sum(-1, keepdim=True))
    assert "aten::nested.sum" in seen
    from kernelwright.gate import guards
    assert guards.cpu_provenance_verdict({"triton::k": [1, 1.0]}, {"aten::nested.sum": [1, 1.0, 0]}, 8)[0] \
        == guards.VENDOR_KERNELS
