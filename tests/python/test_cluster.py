"""The search on a Ray cluster: a local Ray head started here, the same front as a run on
this machine with the same seed."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import heapkit
from heapkit import search as hs

ray = pytest.importorskip("ray", reason="Ray is the optional extra heapkit[ray]; make test installs it")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    ray_cli = str(Path(sys.executable).parent / "ray")
    port = _free_port()
    started = subprocess.run([ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--disable-usage-stats",
                              "--include-dashboard=false", "--node-ip-address=127.0.0.1"],
                             capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stdout + started.stderr
    yield f"127.0.0.1:{port}"
    ray.shutdown()
    subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def trace(programs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cluster") / "churn.hkt"
    heapkit.record([str(programs["churn"]), "10000"], out)
    return out


def test_the_cluster_finds_the_same_front_as_one_machine(ray_head, trace, tmp_path):
    from heapkit.cluster import cluster_cpus, ray_runner

    settings = dict(objectives=("work", "footprint"), population=8, generations=3, seed=5)
    local = hs.search(trace, tmp_path / "local", cache=tmp_path / "local.sqlite", **settings)
    runner = ray_runner(ray_head, trace, dict(heapkit.simulator.DEFAULT_ENERGY))
    assert cluster_cpus() == 2
    remote = hs.search(trace, tmp_path / "remote", cache=tmp_path / "remote.sqlite", runner=runner, **settings)
    assert remote.evaluations == local.evaluations > 0  # every design simulated on the cluster, none cached
    assert [(d.spec.key, d.objectives) for d in remote.front] == [(d.spec.key, d.objectives) for d in local.front]


def test_cli_search_on_the_cluster(ray_head, trace, tmp_path, heapkit_cli):
    done = subprocess.run([*heapkit_cli, "search", str(trace), "-o", str(tmp_path / "out"), "--cluster", ray_head,
                           "--population", "8", "--generations", "1", "--cache", str(tmp_path / "c.sqlite"),
                           "--no-glibc"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "front.json").exists()
