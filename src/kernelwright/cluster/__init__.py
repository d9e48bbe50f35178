"""Evaluation across many GPUs: a worker pool per GPU (local) and a Ray cluster backend.

    from kernelwright.cluster import run_bench_distributed, EvaluationPool, EvalJob

    run_bench_distributed(plans, cfg, out_dir, backend="local", devices=None)   # -> BenchRun
    with EvaluationPool(devices=["cuda:0", "cuda:1"]) as pool:                 # orchestrators
        fut = pool.submit(EvalJob(builtin, workload, [candidate], cfg))         # -> Future[JobResult]
        pool.slots()                                                            # who runs what

Modules: ``devices`` (slots, GPU pinning), ``jobs`` (EvalJob/JobResult, wire form),
``runner`` (the trusted per-GPU evaluator), ``local`` (pool worker processes), ``ray_backend``
(Ray actors; Ray imported lazily), ``pool`` (queue, slots, retries), ``distributed``
(``run_bench_distributed``), ``measure`` (throughput / cross-GPU agreement script).
See docs/cluster.md.
"""

from __future__ import annotations

from kernelwright.lazy import lazy_attributes

__all__ = ["run_bench_distributed", "EvaluationPool", "EvalJob", "JobResult", "JobError", "SlotStatus",
           "DeviceSlot", "resolve_devices", "jobs_from_plans", "WorkerLost", "POOL_WORKER_CRASHED",
           "ray_available"]

_WHERE = {
    "run_bench_distributed": "distributed",
    "EvaluationPool": "pool", "SlotStatus": "pool",
    "EvalJob": "jobs", "JobResult": "jobs", "JobError": "jobs", "jobs_from_plans": "jobs",
    "POOL_WORKER_CRASHED": "jobs",
    "DeviceSlot": "devices", "resolve_devices": "devices",
    "WorkerLost": "local",
    "ray_available": "ray_backend",
}

__getattr__ = lazy_attributes(__name__, _WHERE)
