"""The Ray path on a loopback cluster started here: a head and a worker node, each declaring
GPUs that are not there, run jobs made of the steps that need no device (compile and inspect
the baseline, make inputs, compute the oracle, judge outputs); a job whose worker dies midway
is run again, and every result comes back once, in job order, with where it ran. Then
`cudamaster bench --ray` runs end to end on the nodes' fake GPUs (tests/conftest.py), and on a
second cluster a whole node is killed mid-job and its job finishes on the other node.

Each node is a `ray start --block` in a session of its own, with the clusters' files in a
temporary folder of their own: stopping one ends that session's processes and nothing else,
so a Ray cluster of the user's, or of a test run beside this one, is never touched."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import fake_gpu_env
from cudamaster.bench.evaluate import Impl, ImplResult, prepare
from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import concrete, to_storage
from cudamaster.errors import UserError
from cudamaster.tasks import get_task

ray = pytest.importorskip("ray", reason="the Ray extra: pip install -e '.[test]'")
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def fake_env(tmp_path_factory) -> dict[str, str]:
    """The nodes' environment: the fake GPUs of tests/conftest.py (kernel launches do nothing)."""
    return {**fake_gpu_env(tmp_path_factory.mktemp("fake-gpu")), "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}  # fmt: skip


def _start_node(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """`ray start ARGS --block` in a new session, once its node is up (its output in LOG)."""
    with open(log, "w") as out:
        proc = subprocess.Popen([RAY, "start", *args, "--block"], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop_nodes([proc])
            pytest.fail(f"ray start {' '.join(args)} failed:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    return proc


def _session(sid: int) -> list[int]:
    """The processes of session SID (the node's raylet, its workers, the head's GCS...)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.getsid(int(entry.name)) == sid:
                    pids.append(int(entry.name))
    return pids


def _stop_nodes(nodes: list[subprocess.Popen]) -> None:
    """Stop the nodes started here, and only them: SIGTERM makes `ray start --block` stop its
    node's processes; whatever of their sessions is left after that is killed."""
    for node in nodes:
        if node.poll() is None:
            node.send_signal(signal.SIGTERM)
    for node in nodes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.wait(timeout=60)
        for pid in _session(node.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if node.poll() is None:
            node.wait(timeout=30)


@contextlib.contextmanager
def _cluster(env: dict[str, str], head_args: list[str],
             workers: list[list[str]]) -> Iterator[str]:  # fmt: skip
    """A loopback cluster of a head and WORKERS (extra `ray start` arguments each), its files
    in a folder of its own; yields its address, and stops exactly its nodes afterwards."""
    port = _free_port()
    temp = Path(tempfile.mkdtemp(prefix="cm-ray-"))  # short: Ray's socket paths have a limit
    common = ["--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    nodes: list[subprocess.Popen] = []
    try:
        nodes.append(_start_node(["--head", f"--port={port}", f"--temp-dir={temp}",
                                  "--include-dashboard=false", *common, *head_args], env,
                                 temp / "head.log"))  # fmt: skip
        for n, args in enumerate(workers):
            nodes.append(_start_node([f"--address=127.0.0.1:{port}", *common, *args], env,
                                     temp / f"worker{n}.log"))  # fmt: skip
        yield f"127.0.0.1:{port}"
    finally:
        ray.shutdown()
        _stop_nodes(nodes)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(fake_env):
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ship _check_job
    with _cluster(fake_env, ["--num-cpus=2", "--num-gpus=2"],
                  [["--num-cpus=1", "--num-gpus=1"]]) as address:  # fmt: skip
        yield address


def _check_job(job: tuple[str, str, str | None]) -> dict:
    """A bench job without the GPU: what its Ray task does before and after the timed calls."""
    op, variant, crash_marker = job
    if crash_marker and not Path(crash_marker).exists():
        Path(crash_marker).touch()
        os._exit(1)  # the worker dies in the middle of the job: Ray must run it again
    time.sleep(0.5)  # long enough that all three GPU slots are busy at once
    task = get_task(op)
    built = ImplResult("baseline", "")
    prepare(Impl("baseline", task.source("baseline", variant), trusted=True), "sm_90",
            task.symbol(variant), built)  # fmt: skip
    dtypes = {a.name: concrete(a.dtype, variant) for a in task.spec.args}
    case = task.cases("paper")[0]
    inputs = make_inputs(task, case, variant, 1)
    oracle = task.oracle(inputs.values(dtypes), dict(inputs.params), variant)
    verdicts = {}
    for name, expected in oracle.items():
        ref, mag = expected if isinstance(expected, tuple) else (expected, None)
        tol = task.spec.tolerance[variant]
        right = to_storage(np.asarray(ref), dtypes[name])
        wrong = to_storage(np.asarray(ref) + 1.0, dtypes[name])
        verdicts[name] = [compare(name, out, ref, mag, tol, task.spec.paper_rule, dtypes[name],
                                  stored=True).passed for out in (right, wrong)]  # fmt: skip
    return {"op": op, "variant": variant, "build": built.verdict, "verdicts": verdicts}


def test_jobs_spread_over_the_nodes_and_a_dead_worker_is_retried(cluster, tmp_path):
    from cudamaster.ray_pool import RayPool

    marker = str(tmp_path / "crashed-once")
    pairs = [(op, v) for op in ("vector_add", "dot_product", "softmax") for v in ("fp32", "bf16")]
    jobs = [(op, v, marker if (op, v) == ("dot_product", "bf16") else None) for op, v in pairs]
    finished: list[tuple] = []
    results = RayPool(cluster, retries=2).run(
        jobs, _check_job, lambda job, where, result: finished.append((job, where, result))
    )
    assert [(r["op"], r["variant"]) for r in results] == [j[:2] for j in jobs]  # job order
    assert sorted(f[0] for f in finished) == sorted(jobs)  # each reported once, as it finished
    for r in results:
        assert r["build"] == "pending", r  # compiled, defines its symbol, nothing refused
        assert all(v == [True, False] for v in r["verdicts"].values()), r
    assert Path(marker).exists()  # the crashed job's first attempt really ran and died
    nodes = {where.node for _, where, _ in finished}
    assert len(nodes) == 2, nodes  # both nodes took work
    assert all(where.gpus != "" for _, where, _ in finished)  # Ray gave each task a GPU


def test_a_job_that_keeps_failing_is_a_one_line_error_after_its_retries(cluster, tmp_path):
    from cudamaster.ray_pool import RayPool

    with pytest.raises(UserError, match="job 1 of 1 failed on the Ray cluster"):
        RayPool(cluster, retries=1).run([("no_such_op", "fp32", None)], _check_job)


def test_bench_on_ray_writes_every_result_with_the_node_and_gpu_that_produced_it(
    cluster, fake_env, tmp_path
):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cudamaster.cli", "bench", "--ray", cluster, "--ops",
         "vector_add,dot_product", "--dtype", "fp32", "--suite", "paper", "--out", str(out)],
        env=fake_env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [r["report"]["task"] for r in results].count("vector_add") == 1 and len(results) == 2
    for r in results:
        where = r["placement"]
        assert where["node"] and where["gpus"] and where["gpu"] == "Fake GPU"
        assert where["uuid"] == f"GPU-fake-{where['gpus']}"  # the GPU Ray gave, not GPU 0
        base = next(i for i in r["report"]["impls"] if i["label"] == "baseline")
        # the fake GPU's launches do nothing: the poison stays, and the first unseen case sees it
        assert base["verdict"] == "wrong_on_unseen"
    assert "2 evaluations on Ray" in proc.stdout


def test_bench_on_ray_says_in_one_line_what_is_wrong(fake_env):
    def bench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cudamaster.cli", "bench", "--ops",
                               "vector_add", *args], env=fake_env, capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip

    nobody = bench("--ray", f"127.0.0.1:{_free_port()}")
    assert nobody.returncode == 2 and "no Ray cluster at 127.0.0.1:" in nobody.stderr
    assert "Traceback" not in nobody.stderr
    both = bench("--ray", "auto", "--gpus", "all")
    assert both.returncode == 2 and "--gpus and --ray exclude each other" in both.stderr


def test_calibration_on_ray_keeps_every_profile_with_where_it_ran(cluster, fake_env, tmp_path):
    """The nodes have no ncu: every profile is missing, each saying why and where it ran, and
    the calibration stops with a one-line error instead of inventing thresholds."""
    proc = subprocess.run(
        [sys.executable, "-m", "cudamaster.cli", "profile", "--calibrate", "--ray", cluster,
         "--ops", "vector_add,dot_product", "--out", str(tmp_path)],
        env=fake_env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "needs at least two successful baseline profiles" in proc.stderr
    assert "Traceback" not in proc.stderr
    data = json.loads((tmp_path / "calibration.json").read_text())
    assert len(data["profiles"]) == 4 and len(data["placements"]) == 4  # both ops, both dtypes
    assert all("ncu" in p["result"]["error"] for p in data["profiles"])
    assert {(w["task"], w["variant"]) for w in data["placements"]} == {
        (op, v) for op in ("vector_add", "dot_product") for v in ("fp32", "bf16")
    }
    assert all(w["node"] and w["gpu"] == "Fake GPU" for w in data["placements"])


def _doomed_job(job: tuple[str, str, str | None]) -> dict:
    """_check_job, except that the first attempt of the doomed job kills its node's raylet
    (the process that started this worker): the whole node is lost mid-job."""
    op, variant, doom_marker = job
    if doom_marker and not Path(doom_marker).exists():
        Path(doom_marker).write_text(ray.get_runtime_context().get_node_id())
        os.kill(os.getppid(), 9)
        time.sleep(60)  # dies with its node
    return {**_check_job((op, variant, None)), "node": ray.get_runtime_context().get_node_id()}


def test_a_node_lost_mid_job_has_its_work_run_on_another_node(fake_env, tmp_path):
    """A head with no GPU and two GPU nodes: the node that takes the doomed job dies, and the
    job (and any other it was running) is run again on the surviving node."""
    from cudamaster.ray_pool import RayPool

    ray.shutdown()  # leave the module's cluster: this one loses a node
    marker = tmp_path / "doomed"
    node = ["--num-cpus=1", "--num-gpus=1"]
    with _cluster(fake_env, ["--num-cpus=1", "--num-gpus=0"], [node, node]) as address:
        jobs = [("vector_add", "fp32", None), ("vector_add", "bf16", str(marker)),
                ("dot_product", "fp32", None), ("dot_product", "bf16", None)]  # fmt: skip
        results = RayPool(address, retries=3).run(jobs, _doomed_job)
    lost = marker.read_text()
    assert [(r["op"], r["variant"]) for r in results] == [j[:2] for j in jobs]
    assert all(r["build"] == "pending" for r in results)
    assert results[1]["node"] != lost  # the doomed job finished on the surviving node
