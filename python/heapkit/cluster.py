"""Design evaluations on a Ray cluster (``heapkit search --cluster ray://HOST:PORT``,
``--cluster HOST:PORT`` or ``--cluster auto``; ``pip install heapkit[ray]``).

Evaluations are independent simulations, so a search spreads them over the cluster: the
trace is put in Ray's object store once, and each node writes it to a local file the
first time one of its workers needs it (so it crosses the network once per node); specs
go out in batches, one task per batch, each simulating its designs on one core. Results
come back in the order the specs were given, so a search with the same seed finds the
same front on a cluster as on one machine. Every node needs the heapkit package (the
same version) in the Python its Ray workers run.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable

from heapkit.dmm import Spec


def _simulate_batch(trace_bytes: bytes, digest: str, spec_texts: list[str], energy: dict) -> list[dict]:
    """Runs on a worker: the trace from the node's local copy, the batch on one core."""
    from heapkit.dmm import parse_spec
    from heapkit.search import metrics_record
    from heapkit.simulator import simulate

    folder = Path(tempfile.gettempdir()) / "heapkit-ray-traces"
    folder.mkdir(exist_ok=True)
    path = folder / f"{digest}.hkt"
    if not path.exists():
        partial = folder / f"{digest}.{os.getpid()}.part"
        partial.write_bytes(trace_bytes)
        partial.replace(path)
    from heapkit.search import MAX_STEPS_PER_EVENT

    results = simulate(path, [parse_spec(t) for t in spec_texts], energy=energy, threads=1,
                       max_steps_per_event=MAX_STEPS_PER_EVENT)
    return [metrics_record(r) for r in results]


def connect(address: str) -> None:
    try:
        import ray
    except ImportError:
        raise RuntimeError("--cluster needs Ray: pip install 'heapkit[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)


def ray_runner(address: str, trace: str | Path, energy: dict, batch: int = 4) -> Callable[[list[Spec]], list[dict]]:
    """A runner for :class:`heapkit.search.Evaluator`: simulations on the cluster at ``address``."""
    connect(address)
    import ray

    data = Path(trace).read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:24]
    trace_ref = ray.put(data)
    remote = ray.remote(num_cpus=1)(_simulate_batch)

    def run(specs: list[Spec]) -> list[dict]:
        texts = [s.normalized for s in specs]
        futures = [remote.remote(trace_ref, digest, texts[i:i + batch], energy) for i in range(0, len(texts), batch)]
        return [record for chunk in ray.get(futures) for record in chunk]

    return run


def cluster_cpus() -> float:
    import ray

    return float(ray.cluster_resources().get("CPU", 0))


__all__ = ["cluster_cpus", "connect", "ray_runner"]
