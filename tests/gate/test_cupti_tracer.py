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


@pytest.mark.gpu
def test_a_device_to_host_copy_on_a_private_stream_during_the_hold_is_seen_before_the_release():
    """A copy engine is not held: a device-to-host copy on a stream that does not wait for the
    held one runs during the hold, CUPTI records it, and ``held_prerelease`` counts it as early
    (the gate then refuses device time: red-team case ``host_compute_held``).  A memset on the
    same stream is recorded too when the CUPTI build traces memsets."""
    pytest.importorskip("cupti")
    import cuda.bindings.runtime as rt

    device = torch.device("cuda", torch.cuda.current_device())
    tracer = T.cupti_tracer()
    hold = T.StreamHold.create(device)
    if hold is None:
        pytest.skip(T.StreamHold.why_not(device))
    held, side = torch.cuda.current_stream(), torch.cuda.Stream()
    src = torch.empty(64 << 20, dtype=torch.uint8, device=device)
    dst = torch.empty(src.shape, dtype=torch.uint8, pin_memory=True)
    with torch.cuda.stream(side):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    tracer.drain()
    tracer.drain_copies()
    tracer.begin()
    t0 = tracer.timestamp()
    epoch = hold.begin(held)
    with torch.cuda.stream(side):
        dst.copy_(src, non_blocking=True)
        copied = torch.cuda.Event()
        copied.record(side)
        # after the copy's event: a memset may run as a kernel, which waits for the SMs that the
        # hold occupies (on the H200 it did, and the hold timed out)
        err, = rt.cudaMemsetAsync(src.data_ptr(), 0, 1 << 20, side.cuda_stream)
    copied.synchronize()               # the copy finishes while the stream is held
    held.wait_stream(side)
    hold.release(epoch)
    torch.cuda.synchronize()
    t1 = tracer.timestamp()
    tracer.end()
    kernels = [r for r in tracer.drain() if t0 <= r.start_ns <= t1]
    copies = [c for c in tracer.drain_copies() if t0 <= c.start_ns <= t1]
    assert hold.outcome(epoch) == T.HOLD_RELEASED
    assert tracer.traces_copies and any(c.device_to_host and c.bytes == src.numel() for c in copies), copies
    print("memset traced:", tracer.traces_memsets, err, [c for c in copies if c.memset])
    holds = [r for r in kernels if r.name == T.HOLD_KERNEL_NAME]
    d2h = [c.start_ns for c in copies if c.device_to_host]
    early, lead = T.held_prerelease(d2h, max(r.end_ns for r in holds), T.HOLD_EXIT_SPREAD_NS)
    assert early == 1 and lead > 10, (early, lead)
