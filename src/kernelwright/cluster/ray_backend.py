"""Ray backend: one long-lived Ray actor per GPU (``num_gpus=1``), same runner, same jobs.

Ray is optional (``pip install 'kernelwright[ray]'``) and imported only here, lazily.  Ray
gives each actor exactly one GPU by setting ``CUDA_VISIBLE_DEVICES`` in the actor process, and
never schedules another GPU actor/task on it while the actor lives; inside, the actor is the
trusted parent for its GPU (a ``JobRunner``: references computed there, each solution in a
spawned gate worker that inherits the one-GPU view).  Jobs are streamed back as a Ray
streaming generator (one event per trace).

Every node must have kernelwright (same version) and its dependencies installed: the actor
class and the runner are imported from the installed package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

from kernelwright.cluster.local import WorkerLost


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except Exception:
        return False
    return True


def init_ray(address: Optional[str] = None, **kwargs) -> bool:
    """Connect to (``address``: ``"auto"``, ``"ray://host:10001"``, ``"host:6379"``) or start
    Ray; reuses an existing connection.  Returns True when this call initialised Ray."""
    import ray

    if ray.is_initialized():
        return False
    if address in (None, "", "local"):
        ray.init(**kwargs)
    else:
        ray.init(address=address, **kwargs)
    return True


def cluster_gpus() -> int:
    import ray

    return int(ray.cluster_resources().get("GPU", 0))


class RayEvaluator:
    """The actor (wrapped with ``ray.remote(num_gpus=1)`` at run time)."""

    def __init__(self, name: str, kind: str, env: Dict[str, str], max_sessions: int):
        os.environ.update(env)
        _spawn_without_ray_main()
        import socket

        import ray

        from kernelwright.cluster.runner import JobRunner

        gpu_ids = [str(g) for g in ray.get_gpu_ids()]
        self.gpu = gpu_ids[0] if gpu_ids else "?"
        host = socket.gethostname()
        gate_device = "cpu"
        lock_key = None
        if kind == "cuda":
            import torch

            torch.cuda.set_device(0)
            gate_device = "cuda:0"
            from kernelwright.cluster.devices import describe_gpu

            lock_key = describe_gpu(gate_device).get("uuid") or f"gpu{self.gpu}"
        label = f"{host}/gpu{self.gpu}" if kind == "cuda" else f"{host}/gpu{self.gpu}(cpu)"
        self.runner = JobRunner(gate_device, name, label, max_sessions=max_sessions, lock_key=lock_key)

    def hello(self) -> Dict[str, Any]:
        from kernelwright.cluster.runner import worker_info

        import kernelwright

        info = worker_info(self.runner)
        info["kernelwright"] = kernelwright.__version__
        info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        return info

    def run_job(self, wire: Dict[str, Any]):
        wire = dict(wire, log_dir=None)    # the driver's folder may not exist on this node
        for event in self.runner.run(wire):
            event["loaded"] = self.runner.loaded() if event["op"] == "done" else None
            yield event

    def shutdown(self) -> bool:
        self.runner.close()
        return True


def _spawn_without_ray_main() -> None:
    """Gate workers are spawned (multiprocessing "spawn"), which re-runs the parent's main
    module in the child.  In a Ray actor that is Ray's ``default_worker.py``: the untrusted
    gate worker would import Ray for nothing.  A ``__main__.__spec__`` named ``*.__main__``
    makes spawn skip that step (``multiprocessing.spawn._fixup_main_from_name``), so the gate
    worker starts exactly as it does under ``kernelwright bench``.  The actor process is ours
    for its lifetime; Ray does not read ``__main__.__spec__``."""
    import importlib.machinery
    import sys

    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None:
        return
    if "ray" not in os.path.normpath(str(getattr(main, "__file__", ""))).split(os.sep):
        return
    main.__spec__ = importlib.machinery.ModuleSpec("kernelwright_ray_actor.__main__", None)


_ACTOR = None


def _actor_class():
    global _ACTOR
    if _ACTOR is None:
        import ray

        _ACTOR = ray.remote(num_gpus=1, max_restarts=0, max_task_retries=0)(RayEvaluator)
    return _ACTOR


@dataclass(eq=False)
class RayWorker:
    """Pool-side handle of one GPU actor (same interface as ``LocalWorker``)."""

    backend = "ray"

    index: int
    name: str
    kind: str
    env: Dict[str, str]
    max_sessions: int = 16
    start_timeout_s: float = 900.0
    actor: Any = field(default=None, init=False)
    info: Dict[str, Any] = field(default_factory=dict, init=False)

    @property
    def device(self) -> str:
        return self.info.get("device") or f"ray-gpu-slot{self.index}"

    @property
    def pid(self) -> Optional[int]:
        return self.info.get("pid")

    @property
    def alive(self) -> bool:
        return self.actor is not None

    def start(self) -> Dict[str, Any]:
        import ray

        self.actor = _actor_class().options(name=None).remote(self.name, self.kind, self.env, self.max_sessions)
        try:
            info = ray.get(self.actor.hello.remote(), timeout=self.start_timeout_s)
        except Exception as exc:
            self.kill()
            raise WorkerLost(f"Ray actor {self.name} could not start: {type(exc).__name__}: {exc}") from exc
        import kernelwright

        if info.get("kernelwright") != kernelwright.__version__:
            info["version_warning"] = (f"node has kernelwright {info.get('kernelwright')}, "
                                       f"driver {kernelwright.__version__}")
        self.info = info
        return info

    def run(self, wire: Dict[str, Any], on_event: Callable[[Dict[str, Any]], None], inactivity_s: float) -> None:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayError

        try:
            gen = self.actor.run_job.remote(wire)
            while True:
                ready, _ = ray.wait([gen], timeout=inactivity_s)
                if not ready:
                    self.kill()
                    raise WorkerLost(f"Ray actor {self.name} ({self.device}) sent nothing for {inactivity_s:.0f} s; killed")
                try:
                    ref = next(gen)
                except StopIteration:
                    raise WorkerLost(f"Ray actor {self.name} ended the job without 'done'")
                event = ray.get(ref)
                on_event(event)
                if event.get("op") == "done":
                    return
        except WorkerLost:
            raise
        except (RayActorError, GetTimeoutError) as exc:
            self.kill()
            raise WorkerLost(f"Ray actor {self.name} ({self.device}) died: {type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:300] if str(exc) else ''}") from exc
        except RayError as exc:
            self.kill()
            raise WorkerLost(f"Ray actor {self.name} ({self.device}) failed: {type(exc).__name__}: "
                             f"{str(exc)[:500]}") from exc

    def kill(self) -> None:
        if self.actor is None:
            return
        try:
            import ray

            ray.kill(self.actor, no_restart=True)
        except Exception:
            pass
        self.actor = None

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.actor is None:
            return
        try:
            import ray

            ray.get(self.actor.shutdown.remote(), timeout=timeout_s)
        except Exception:
            pass
        self.kill()
