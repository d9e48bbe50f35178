"""The gate's CUPTI kernel clock: every window sees the kernels launched in it, also after the
tracer detached CUPTI between windows (``CuptiKernelTracer.end`` -> ``cuptiFinalize``)."""
import pytest
import torch

from kernelwright.gate import timing as T


@pytest.mark.gpu
def test_cupti_windows_see_their_kernels_across_detaches():
    pytest.importorskip("cupti")
    tracer = T.cupti_tracer()
    assert tracer.available()
    x = torch.zeros(1024, device="cuda")
    for launches in (1, 3, 2):
        tracer.drain()
        tracer.begin()
        t0 = tracer.timestamp()
        for _ in range(launches):
            x.add_(1)
        torch.cuda.synchronize()
        t1 = tracer.timestamp()
        tracer.end()
        inside = [r for r in tracer.drain() if t0 <= r.start_ns <= t1]
        assert len(inside) == launches, (launches, [r.name for r in inside], tracer.detaches)
    assert x[0].item() == 6.0
    print("detaches:", tracer.detaches)


@pytest.mark.gpu
def test_cupti_detaches_on_the_h200():
    """On the machine the records come from, the tracer must detach (else the headline clock
    pays CUPTI's per-launch cost after the first workload)."""
    pytest.importorskip("cupti")
    if "H200" not in torch.cuda.get_device_name():
        pytest.skip("records machine only")
    assert T.cupti_tracer().detaches
