"""The Ray engine: one Ray task per video, on a local Ray or a cluster; a crash costs one video.

One task per video was measured against Ray Data's ``map_batches`` with batches of 1 and 4
(docs/batch.md, bench/batch_ray_modes.py): no difference beyond the noise, and a task is the
unit Ray retries, cancels and reports a dead worker for, so a crash fails one video's row
rather than a batch of them (and the extra needs no pyarrow). Workers write each
video's output folder themselves: the batch's output folder must be on storage every node sees.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from backend.batch.local import RowCallback, limit_threads
from backend.batch.unit import UnitTask, failed_row, remove_partials
from backend.errors import InputError

AGENT_START_TIMEOUT_MS = 300_000
MONITOR_PROCESS = "monitor"
"""Ray's name for its autoscaler monitor process (``ray._private.ray_constants.PROCESS_TYPE_MONITOR``)."""
IN_FLIGHT_PER_CPU = 2
"""Tasks submitted ahead per cluster CPU: enough to keep every worker busy, few enough that
a Ctrl-C has little to cancel and a million-video batch holds few object refs."""


def ray_unit(task: UnitTask) -> dict[str, Any]:
    """The body of a Ray task: :func:`~backend.batch.unit.run_unit`."""
    from backend.batch.unit import run_unit

    limit_threads()  # cheap; a Ray worker process runs many tasks, a cluster's without our env
    return run_unit(task)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise InputError(
            "the ray engine needs Ray, which is not installed (pip install 'codec-lens[ray]')", stage="batch"
        ) from exc
    return ray


def code_root() -> Path:
    """The folder holding the ``backend`` package this process runs (local Ray workers import it)."""
    import backend

    return Path(backend.__file__).resolve().parents[1]


def worker_environment() -> dict[str, str]:
    """The variables a private local Ray starts with, which its workers inherit: the folder of
    the code this process runs first on ``PYTHONPATH`` (a checkout as well as an install) and
    OpenBLAS on one thread."""
    path = [str(code_root()), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(path), "OPENBLAS_NUM_THREADS": "1"}


def local_ray_options(cpus: int | None) -> dict[str, Any]:
    """``ray.init`` arguments of the private local Ray a batch starts (:func:`init_local_ray`):
    ``cpus`` CPUs, no dashboard, on 127.0.0.1 only, quiet.

    No ``runtime_env``: the workers get their variables by inheritance
    (:func:`worker_environment`). A job-level ``runtime_env`` made Ray start new workers for
    the job instead of using the ones it starts with the node: the first task waited
    ~0.7 s longer (docs/batch.md, "Ray's fixed costs").
    """
    return {
        # "local": always a new Ray. Without an address, ray.init joins the cluster named by
        # RAY_ADDRESS or a `ray start` cluster running on this machine, if there is one.
        "address": "local",
        "num_cpus": cpus,
        "include_dashboard": False,
        "_node_ip_address": "127.0.0.1",
        "logging_level": logging.WARNING,
        "log_to_driver": False,
        "configure_logging": False,
        # The raylet waits this long for its agent process to start; on a loaded 2-core machine
        # the default was too short and Ray's start failed ("Timed out waiting for file …").
        "_system_config": {"agent_register_timeout_ms": AGENT_START_TIMEOUT_MS},
    }


def init_local_ray(cpus: int | None) -> None:
    """Start a private local Ray of ``cpus`` CPUs (:func:`local_ray_options`) whose processes
    inherit :func:`worker_environment`; this process's own environment is put back after."""
    ray = _import_ray()
    env = worker_environment()
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        ray.init(**local_ray_options(cpus))
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def stop_local_ray(ray: Any) -> None:
    """Stop the private local Ray this process started (``ray.shutdown``), its autoscaler
    monitor killed first.

    ``ray.shutdown`` sends SIGTERM to each Ray process in turn and waits up to 1 s for each to
    exit; the autoscaler monitor, which a one-node private Ray never uses (and ``ray.init``
    cannot leave out), took that whole second every time: 1.0 s of a 1.3 s shutdown here
    (docs/batch.md, "Ray's fixed costs"). The monitor is reached through Ray's private node
    object; with a Ray that lacks it, the plain shutdown runs.
    """
    node = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    processes = getattr(node, "all_processes", None) or {}
    for info in processes.get(MONITOR_PROCESS, ()):
        process = getattr(info, "process", None)
        if process is not None and process.poll() is None:
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=1.0)
    ray.shutdown()


def _join_cluster(ray: Any, address: str) -> None:
    """Connect to the running cluster at ``address``; InputError (one line) when that fails."""
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, configure_logging=False)
    except ConnectionError as exc:  # Ray retries for ~20 s first
        # Ray 2.60's ``ray start`` turns token authentication on, but a driver given an address
        # sends no token unless told to: the GCS refuses it and Ray says only "Failed to connect".
        hint = (
            "; a cluster started with `ray start` wants its token: set RAY_AUTH_MODE=token (the token is "
            "read from RAY_AUTH_TOKEN or ~/.ray/auth_token)"
            if "RAY_AUTH_MODE" not in os.environ
            else ""
        )
        raise InputError(f"cannot join the Ray cluster at {address} ({exc}){hint}", stage="batch") from exc


def run_ray(
    tasks: Sequence[UnitTask],
    *,
    workers: int | None,
    address: str | None,
    on_row: RowCallback,
) -> None:
    """Run every task as a Ray task (1 CPU each), ``on_row`` per video as tasks finish.

    Parameters
    ----------
    workers : CPUs of the local Ray started when ``address`` is None (None: all cores);
        ignored on a cluster, whose CPUs bound the tasks running at once.
    address : a running cluster (``ray://host:10001`` or ``host:6379``; ``auto``), or None to
        start a private local Ray for this batch (no dashboard, on 127.0.0.1).

    A task whose worker dies fails its video with one line; Ctrl-C cancels the tasks in
    flight, removes their partial outputs and propagates.
    """
    ray = _import_ray()
    from ray import exceptions as ray_errors

    started = False
    if not ray.is_initialized():
        if address is None:
            init_local_ray(workers)
        else:
            _join_cluster(ray, address)
        started = True
    remote = ray.remote(num_cpus=1, max_retries=0)(ray_unit)
    window = max(1, int(ray.cluster_resources().get("CPU", workers or 1)) * IN_FLIGHT_PER_CPU)
    todo = list(reversed(tasks))
    pending: dict[Any, UnitTask] = {}
    try:
        while todo or pending:
            while todo and len(pending) < window:
                task = todo.pop()
                pending[remote.remote(task)] = task
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                try:
                    row = ray.get(ref)
                except ray_errors.RayError as exc:  # the task's worker or node died; or a bug
                    remove_partials(task)
                    if isinstance(exc, ray_errors.RayTaskError):
                        what = f"internal error ({str(exc).strip().splitlines()[-1]})"
                    else:
                        what = f"the worker died during the run ({type(exc).__name__})"
                    row = failed_row(task, f"{task.path}: {what}")
                on_row(row)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        for task in pending.values():
            remove_partials(task)
        raise
    finally:
        if started and address is None:
            stop_local_ray(ray)
        elif started:
            ray.shutdown()  # leaves the cluster: disconnects only
