"""dist_* kvstores for real: scheduler, server and two workers started by launch_dist."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid

import pytest
from mx_helpers import BENCHMARKS, REPO, backend_env, run_process
from mxnet_benchmarks.launch_dist import free_port, role_environment

pytestmark = pytest.mark.mxnet

LAUNCHER = [sys.executable, "-m", "mxnet_benchmarks.launch_dist"]

# Each worker trains w (initially 1) of y = w * x with loss y, x = rank + 1, SGD lr 1 and no
# momentum, through the same gluon.Trainer path as benchmarks.py. Summed over two workers
# the gradient is 1 + 2 = 3, so after one step every worker must hold w = 1 - 3 = -2.
GRADIENT_SUM_WORKER = textwrap.dedent("""
    import warnings
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import mxnet as mx
    from mxnet import autograd, gluon

    kv = mx.kv.create("{kv_store}")
    net = gluon.nn.Dense(1, in_units=1, use_bias=False, weight_initializer=mx.init.One())
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {{"learning_rate": 1.0}}, kvstore=kv)
    x = mx.nd.full((1, 1), kv.rank + 1)
    with autograd.record():
        y = net(x).sum()
    y.backward()
    trainer.step(1)
    weight = float(net.weight.data().asnumpy().ravel()[0])
    # One write(2) of the whole line: both workers share the pipe, and print() writes the
    # text and its newline separately when stdout is unbuffered, so lines could interleave.
    import os
    os.write(1, ("rank=%d workers=%d weight=%s\\n" % (kv.rank, kv.num_workers, weight)).encode())
""")


@pytest.mark.parametrize("kv_store", ["dist_sync", "dist_device_sync"])
def test_two_workers_sum_their_gradients(tmp_path, kv_store):
    script = tmp_path / "worker.py"
    script.write_text(GRADIENT_SUM_WORKER.format(kv_store=kv_store))
    run = run_process(LAUNCHER + ["--num_workers", "2", "--num_servers", "1", "--",
                                  sys.executable, str(script)], timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = sorted(line for line in run.stdout.splitlines() if line.startswith("rank="))
    assert lines == ["rank=0 workers=2 weight=-2.0", "rank=1 workers=2 weight=-2.0"]


def test_one_launcher_per_node_forms_one_job(tmp_path):
    # Two "nodes" on this machine, as srun starts them: the first also runs the scheduler,
    # each runs one server and one worker, and all meet at one fixed port.
    script = tmp_path / "worker.py"
    script.write_text(GRADIENT_SUM_WORKER.format(kv_store="dist_sync"))
    port = str(free_port("127.0.0.1"))
    common = ["--num_workers", "2", "--num_servers", "2", "--local_workers", "1",
              "--local_servers", "1", "--host", "127.0.0.1", "--port", port,
              "--node_host", "127.0.0.1", "--timeout", "100"]
    env = backend_env()
    nodes = [subprocess.Popen(LAUNCHER + common + ["--scheduler", role, "--", sys.executable,
                                                   str(script)],
                              env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
             for role in ("yes", "no")]
    outputs = [node.communicate(timeout=120)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0]
    lines = sorted(line for out in outputs for line in out.splitlines()
                   if line.startswith("rank="))
    assert lines == ["rank=0 workers=2 weight=-2.0", "rank=1 workers=2 weight=-2.0"]


def test_dmlc_variables_of_a_role():
    env = role_environment({"PATH": "/bin"}, "server", "10.0.0.1", 9091, 4, 2, None)
    assert env == {"PATH": "/bin", "DMLC_ROLE": "server", "DMLC_PS_ROOT_URI": "10.0.0.1",
                   "DMLC_PS_ROOT_PORT": "9091", "DMLC_NUM_WORKER": "4",
                   "DMLC_NUM_SERVER": "2"}
    assert role_environment({}, "worker", "h", 1, 1, 1, "10.0.0.7")["DMLC_NODE_HOST"] == \
        "10.0.0.7"


def test_benchmark_dist_sync_two_workers(tmp_path):
    run = run_process(LAUNCHER + [
        "--num_workers", "2", "--num_servers", "1", "--timeout", "200", "--",
        sys.executable, str(BENCHMARKS), "--model", "sensor_net", "--device", "cpu",
        "--kv_store", "dist_sync", "--batch_size", "4", "--num_batches", "3",
        "--num_warmup_batches", "1",
    ])
    assert run.returncode == 0, run.stderr[-3000:]
    values = run.values
    assert values["results.status"] == "ok"
    # Only rank 0 prints results, and its throughput counts both workers' batches.
    assert run.stdout.count("__results.time__=") == 1
    assert values["results.throughput"] == pytest.approx(2 * 4 * 1000.0 / values["results.time"])
    assert len(values["results.time_data"]) == 3


def test_failing_workers_fail_the_job(tmp_path):
    run = run_process(LAUNCHER + [
        "--num_workers", "2", "--", sys.executable, str(BENCHMARKS), "--model", "nope",
        "--device", "cpu", "--kv_store", "dist_sync",
    ], timeout=120)
    assert run.returncode == 2
    assert run.values["results.status"] == "failure"
    assert run.values["results.status_msg"].startswith("launch_dist: worker ")
    assert "exited with status 2" in run.values["results.status_msg"]


def _processes_with(token: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    if token.encode() in cmdline.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def test_timeout_kills_every_role_and_fails(tmp_path):
    token = f"hung-worker-{uuid.uuid4().hex}"
    hung = f"import time, sys; sys.argv.append('{token}'); time.sleep(600)  # {token}"
    run = run_process(LAUNCHER + ["--num_workers", "2", "--timeout", "3", "--",
                                  sys.executable, "-c", hung], timeout=60)
    assert run.returncode == 124
    assert run.values["results.status"] == "failure"
    assert "timed out after 3 s" in run.values["results.status_msg"]
    assert _processes_with(token) == []


@pytest.mark.parametrize(("flags", "message"), [
    (["--num_workers", "2"], "give the worker command after --"),
    (["--num_workers", "0", "--", "true"], "must be at least 1"),
    (["--num_workers", "2", "--scheduler", "no", "--", "true"], "--port is needed"),
])
def test_launcher_usage_errors(flags, message):
    run = run_process(LAUNCHER + flags, timeout=60)
    assert run.returncode == 2
    assert message in run.stderr
