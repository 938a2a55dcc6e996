"""Jobs as Ray tasks on a running Ray cluster, one GPU each: the many-host GpuPool.

Ray gives each task one GPU of its node (CUDA_VISIBLE_DEVICES), so a job's evaluations (baseline
and library, interleaved) share one GPU and every ratio compares timings from one GPU. A task
whose worker process or node dies is run again elsewhere by Ray (``retries``); a job that
raises GpuLost is retried the same way. Results come back to this process as they finish, and
``done`` writes them into the run directory as a local run does, so nothing finished is lost
and an interrupted run can be resumed. Optional: ``pip install 'cudamaster[ray]'``.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .errors import UserError
from .gpus import GpuLost

log = logging.getLogger(__name__)
J = TypeVar("J")
R = TypeVar("R")


@dataclass(frozen=True)
class Placement:
    """Where a job ran: the Ray node (id and address) and the GPU Ray gave it there."""

    node: str
    host: str
    gpus: str  # CUDA_VISIBLE_DEVICES in the task

    def as_dict(self) -> dict[str, str]:
        return {"node": self.node, "host": self.host, "gpus": self.gpus}


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError("--ray needs Ray: pip install 'cudamaster[ray]'") from None
    return ray


def connect(address: str) -> None:
    """Join the running Ray cluster at address ('auto': the one this host belongs to)."""
    ray = _ray()
    if ray.is_initialized():
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if host and port.isdigit():  # Ray waits minutes for an address that answers nothing
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as exc:
            raise UserError(
                f"no Ray cluster at {address}: {exc.strerror or exc} "
                "(start one with `ray start --head`, or give its address)"
            ) from None
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"no Ray cluster at {address}: {first} (start one with `ray start --head`)"
        ) from None


def _placed(work: Callable[[J], R], job: J) -> tuple[Placement, R]:
    """The job, run inside a Ray task: its result and where it ran."""
    ray = _ray()
    ctx = ray.get_runtime_context()
    here = Placement(ctx.get_node_id(), ray.util.get_node_ip_address(),
                     os.environ.get("CUDA_VISIBLE_DEVICES", ""))  # fmt: skip
    return here, work(job)


class RayPool:
    """Run work(job) for every job as a Ray task needing ``gpus`` GPUs (one by default)."""

    def __init__(self, address: str, retries: int = 3, gpus: float = 1.0) -> None:
        connect(address)
        self.retries, self.gpus = retries, gpus

    def run(
        self,
        jobs: list[J],
        work: Callable[[J], R],
        done: Callable[[J, Placement, R], None] | None = None,
    ) -> list[R]:
        """The results in job order; done(job, placement, result) is called here as each job
        finishes. ``work`` must be importable or picklable on the cluster's nodes."""
        ray = _ray()
        task = ray.remote(num_gpus=self.gpus, max_retries=self.retries,
                          retry_exceptions=[GpuLost])(_placed)  # fmt: skip
        index = {task.remote(work, job): i for i, job in enumerate(jobs)}
        results: dict[int, R] = {}
        pending = list(index)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                i = index[ref]
                try:
                    placement, result = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    for left in pending:
                        ray.cancel(left)
                    first = str(exc).strip().splitlines()[0]
                    raise UserError(
                        f"job {i + 1} of {len(jobs)} failed on the Ray cluster (a lost worker "
                        f"or node is retried {self.retries} times): {first}"
                    ) from None
                results[i] = result
                if done is not None:
                    done(jobs[i], placement, result)
        return [results[i] for i in range(len(jobs))]
