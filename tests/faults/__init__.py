"""Faults the tests inject: a worker or command that aborts at a stage, as a decoder's crash would.

Production code has no test switch. A process a test starts gets its fault from its
environment (:func:`fault_env`: this folder's ``sitecustomize`` arms it at start-up); a job
a test hands to the app's pool itself gets it from the job (:class:`AbortAt`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faults.sitecustomize import STAGE_ENV, VIDEO_ENV, abort_now, wait_for

FAULTS_DIR = Path(__file__).resolve().parent
"""The folder that goes first on PYTHONPATH (its ``sitecustomize`` runs at start-up)."""

__all__ = ["FAULTS_DIR", "STAGE_ENV", "VIDEO_ENV", "AbortAt", "fault_env"]


def fault_env(stage: str, *, video: str | None = None) -> dict[str, str]:
    """The variables that make a process started with them abort at ``stage``.

    ``stage`` is a stage name (``decode``) or ``STAGE@PATH`` (hold there until the file
    ``PATH`` exists, then abort); ``video``: only for the video whose path ends so. Add them
    to a subprocess's environment, or set them (``monkeypatch.setenv``) before the app's or
    the batch's workers are spawned: they inherit them.
    """
    path = [str(FAULTS_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {"PYTHONPATH": os.pathsep.join(path), STAGE_ENV: stage}
    if video is not None:
        env[VIDEO_ENV] = video
    return env


class _AbortingProgress:
    """A job's ``progress`` that, after passing a report on, aborts when it names ``stage``."""

    def __init__(self, progress: Any, stage: str, gate: str) -> None:
        self._progress, self._stage, self._gate = progress, stage, gate

    def __call__(self, stage: str, fraction: float) -> None:
        self._progress(stage, fraction)
        self._maybe_abort(stage)

    def enter(self, stage: str) -> None:
        self._progress.enter(stage)
        self._maybe_abort(stage)

    def _maybe_abort(self, stage: str) -> None:
        if stage == self._stage:
            wait_for(self._gate)
            abort_now()


@dataclass(frozen=True)
class AbortAt:
    """A pool job (picklable: ``job`` is module-level) that aborts its worker as soon as ``job``
    reports ``stage`` (``progress(stage, …)`` or ``progress.enter(stage)``); ``STAGE@PATH``
    holds there until the file ``PATH`` exists."""

    job: Callable[..., Any]
    stage: str

    def __call__(self, *args: Any, progress: Any, **kwargs: Any) -> Any:
        stage, _, gate = self.stage.partition("@")
        return self.job(*args, progress=_AbortingProgress(progress, stage, gate), **kwargs)
