"""Spreading work over the GPUs of a host: selection, one job at a time per GPU, retries."""

import threading
import time

import pytest

from cudamaster import gpus
from cudamaster.errors import UserError
from cudamaster.gpus import Gpu, GpuLost, GpuPool

HOST = [Gpu(0, "GPU-a", "NVIDIA H200"), Gpu(1, "GPU-b", "NVIDIA H200"), Gpu(2, "GPU-c", "H100")]


def test_gpus_option_selects_all_some_or_the_first():
    assert gpus.select(None, HOST) == HOST[:1]
    assert gpus.select("all", HOST) == HOST
    assert gpus.select("2,0", HOST) == [HOST[2], HOST[0]]
    with pytest.raises(UserError, match="there is no GPU 5"):
        gpus.select("0,5", HOST)
    with pytest.raises(UserError, match="'all' or indices"):
        gpus.select("first", HOST)
    # a host without GPUs still says what is wrong with the option before that it has none
    with pytest.raises(UserError, match="'all' or indices"):
        gpus.select("first", [])
    with pytest.raises(UserError, match=f"^{gpus.NO_GPU}$"):
        gpus.select("0,5", [])


def test_every_gpu_works_but_never_two_jobs_on_one_gpu_at_once():
    busy: dict[str, int] = {}
    peak: dict[str, int] = {}
    lock = threading.Lock()

    def work(job: int, gpu: Gpu) -> tuple[int, str]:
        assert gpus.pinned() == gpu  # the thread is pinned while it works
        with lock:
            busy[gpu.uuid] = busy.get(gpu.uuid, 0) + 1
            peak[gpu.uuid] = max(peak.get(gpu.uuid, 0), busy[gpu.uuid])
        time.sleep(0.02)
        with lock:
            busy[gpu.uuid] -= 1
        return job, gpu.uuid

    seen = []
    results = GpuPool(HOST).run(list(range(12)), work, lambda j, g, r: seen.append(j))
    assert [r[0] for r in results] == list(range(12))  # results come back in job order
    assert sorted(seen) == list(range(12))
    assert set(peak) == {"GPU-a", "GPU-b", "GPU-c"} and set(peak.values()) == {1}
    assert gpus.pinned() is None


def test_a_job_whose_gpu_is_lost_runs_again_on_another():
    ran_on: list[str] = []

    def work(job: int, gpu: Gpu) -> str:
        ran_on.append(gpu.uuid)
        if gpu.uuid == "GPU-b":
            raise GpuLost("the GPU fell off the bus")
        time.sleep(0.01)
        return gpu.uuid

    results = GpuPool(HOST[:2]).run(list(range(6)), work)
    assert set(results) == {"GPU-a"}  # everything finished on the GPU that was left
    assert ran_on.count("GPU-b") == 1  # the lost GPU got no more work


def test_losing_every_gpu_is_a_clear_error_not_a_hang():
    def work(job: int, gpu: Gpu) -> None:
        raise GpuLost("gone")

    with pytest.raises(UserError, match="every GPU was lost"):
        GpuPool(HOST[:2]).run(list(range(4)), work)


def test_an_error_in_a_job_stops_the_run_and_reaches_the_caller():
    def work(job: int, gpu: Gpu) -> None:
        if job == 3:
            raise ValueError("broken job")

    with pytest.raises(ValueError, match="broken job"):
        GpuPool(HOST).run(list(range(8)), work)


def test_a_pinned_thread_starts_processes_that_see_only_its_gpu():
    from cudamaster.bench.client import worker_env

    with gpus.pin(HOST[1]):
        assert worker_env()["CUDA_VISIBLE_DEVICES"] == "GPU-b"
    with gpus.pin(Gpu.default()):  # the default GPU pins nothing
        assert gpus.pinned() is None
    assert gpus.pinned() is None
