"""Test-only fault injection, run at start-up by every process a test starts with this folder on PYTHONPATH.

A test that wants a process (the CLI, the app's workers, the batch's workers, a local Ray's
workers) to die as a decoder's heap corruption would puts this folder first on
``PYTHONPATH`` and sets, in that process's environment:

``CODEC_LENS_TEST_ABORT_STAGE=STAGE``
    abort (SIGABRT, no core file) when the pipeline's stage function ``STAGE`` (an entry of
    ``backend.pipeline.registry.STAGES``) is called; ``STAGE@PATH`` holds the call until the
    file ``PATH`` exists first, so that a test can act while the job is certainly in flight.
``CODEC_LENS_TEST_ABORT_VIDEO=SUFFIX`` (optional)
    only for a video whose path ends with ``SUFFIX`` (one video of a batch).

The stage's table entry is wrapped as soon as the registry module has run. The abort happens
inside the stage function's own frame, so faulthandler's dump names the stage, as it would
for a real crash there. Without the variable nothing is changed. No production code reads it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.abc
import os
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

STAGE_ENV = "CODEC_LENS_TEST_ABORT_STAGE"
VIDEO_ENV = "CODEC_LENS_TEST_ABORT_VIDEO"
REGISTRY_MODULE = "backend.pipeline.registry"


def abort_now() -> None:
    """Die as a decoder's heap-corruption abort would (SIGABRT), without leaving a core file."""
    import contextlib
    import resource

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.abort()


def wait_for(gate: str) -> None:
    """Hold until the file ``gate`` exists ('' : not at all)."""
    while gate and not os.path.exists(gate):
        time.sleep(0.02)


def _is_of(video: str, args: Sequence[Any]) -> bool:
    """Whether a stage call's inputs are of the video whose path ends with ``video``."""
    if not video:
        return True
    return any(str(getattr(arg, "path", arg)).endswith(video) for arg in args)


def aborting(function: Callable[..., Any], *, gate: str = "", video: str = "") -> Callable[..., Any]:
    """``function`` (a stage function) made to abort once called: inside its own frame (a profile
    hook on its code), so that the crash's Python frames name it."""
    code = function.__code__

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            abort_now()

    @functools.wraps(function)
    def faulty(*args: Any, **kwargs: Any) -> Any:
        if not _is_of(video, args):
            return function(*args, **kwargs)
        wait_for(gate)
        sys.setprofile(hook)
        return function(*args, **kwargs)

    return faulty


def arm(registry: ModuleType, spec: str, video: str = "") -> None:
    """Wrap the entry ``STAGE`` of ``registry.STAGES`` (``spec`` is ``STAGE`` or ``STAGE@GATE``)."""
    stage, _, gate = spec.partition("@")
    table = registry.STAGES
    entry = table.lookup(stage)
    # The table has no setter (production code never replaces an entry); tests may.
    table._by_name[stage] = dataclasses.replace(
        entry, function=aborting(entry.function, gate=gate, video=video)
    )


class _ArmAfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of the registry module so that :func:`arm` runs
    right after the module has (the stage table exists, nobody has looked an entry up yet)."""

    def __init__(self, spec: str, video: str) -> None:
        self.spec, self.video = spec, video

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != REGISTRY_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            found = finder.find_spec(name, path, target)
            if found is not None and found.loader is not None:
                run = found.loader.exec_module

                def exec_module(module: ModuleType, run: Callable[[ModuleType], None] = run) -> None:
                    run(module)
                    arm(module, self.spec, self.video)

                found.loader.exec_module = exec_module
                return found
        return None


def install() -> None:
    """Arm the fault of this process's environment (nothing without :data:`STAGE_ENV`)."""
    spec = os.environ.get(STAGE_ENV)
    if not spec:
        return
    video = os.environ.get(VIDEO_ENV, "")
    if REGISTRY_MODULE in sys.modules:
        arm(sys.modules[REGISTRY_MODULE], spec, video)
    else:
        sys.meta_path.insert(0, _ArmAfterImport(spec, video))


if __name__ == "sitecustomize":  # imported by site at start-up, not by a test importing the package
    install()
