"""The app's server-side state: the session store, allowed folders, opened runs and uploads."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.errors import InputError, OutputError
from backend.paths import resolve_within
from backend.runs import decode_is_cached, open_run
from backend.store import SessionStore

REPO = Path(__file__).resolve().parents[1]
SAMPLE_VIDEO = REPO / "sample_videos" / "flower_timelapse_cc0.mp4"
DEFAULT_HOME = Path.home() / ".codec-lens"
UPLOADS_DIR = "uploads"
"""Uploads are copied here, under the workspace's output folder."""


@dataclass
class Workspace:
    """Shared by every tab: one store, the folders user paths may touch, a small run cache.

    ``input_roots``: folders typed paths and uploads may be read from.
    ``output_root``: the one folder exports and imports may write into.
    Results are kept per run id (few at a time: each holds decoded pixels).
    """

    store_path: Path
    input_roots: tuple[Path, ...]
    output_root: Path
    max_open_runs: int = 3
    pool: Any = field(default=None, repr=False)
    """The app's worker pool (app.workers.WorkerPool) for native work; None runs it in-process."""
    warm_frame: Any = field(default=None, repr=False)
    """Starts rendering a frame the page is about to ask for (run id, row, layers, opacity,
    colormap, scale, heat); set by app.main.build_app, None does nothing."""
    _store: SessionStore | None = field(default=None, repr=False)
    _results: OrderedDict[str, Any] = field(default_factory=OrderedDict, repr=False)
    _memory: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def store(self) -> SessionStore:
        with self._lock:
            if self._store is None:
                self._store = SessionStore(self.store_path)
            return self._store

    @property
    def memory(self) -> dict[str, Any]:
        """Decoded fronts by cache key, shared with ``sessions.reselect``."""
        return self._memory

    def input_path(self, path: str | Path) -> Path:
        """A readable path inside ``input_roots`` or, typed whole, inside a folder this session
        file's own runs wrote (:meth:`recorded_roots`); InputError otherwise."""
        try:
            return resolve_within(path, self.input_roots, kind="input")
        except InputError:
            # Only an absolute path: a relative one means the first input root, not a recorded folder.
            if not Path(str(path).strip()).expanduser().is_absolute():
                raise
            recorded = self.recorded_roots()
            if not recorded:
                raise
            try:
                return resolve_within(path, recorded, kind="input")
            except InputError:
                pass
            raise

    def recorded_roots(self) -> tuple[Path, ...]:
        """Folders the app or the CLI wrote for this session file and the store records, so that
        what they wrote can be read back: the comparisons' encodes (``<session>.compare/``, or the
        folder a comparison's reference was written to) and every stored batch's output folder."""
        from backend.compare import default_output_dir

        store = self.store
        roots = {default_output_dir(store, "x").parent}  # <session>.compare/
        for row in store.list_comparisons():
            # A codec comparison writes its encodes next to its lossless reference; a selector
            # comparison (no reference) or one over given files writes nothing.
            reference = row.get("reference_path")
            if row.get("status") == "done" and reference and row.get("source_path") != reference:
                roots.add(Path(str(reference)).parent)
        roots.update(Path(str(out_dir)) for out_dir in store.list_datasets()["out_dir"] if out_dir)
        return tuple(sorted(roots))

    def output_path(self, path: str | Path) -> Path:
        """A writable path inside ``output_root`` (OutputError otherwise)."""
        return resolve_within(path, (self.output_root,), kind="output")

    def remember(self, run_id: str, result: Any) -> None:
        """Keep a result the app just produced, so opening it costs nothing."""
        with self._lock:
            self._results[run_id] = result
            self._results.move_to_end(run_id)
            while len(self._results) > self.max_open_runs:
                self._results.popitem(last=False)

    def result(self, run_id: str) -> Any:
        """The RunResult of a stored run (cached; rebuilt from the decode cache on a miss)."""
        with self._lock:
            if run_id in self._results:
                self._results.move_to_end(run_id)
                return self._results[run_id]
            try:
                self.ensure_decoded(run_id)
                result = open_run(self.store, run_id, memory=self._memory)
            except InputError:
                # Its decode is no longer cached and the video has gone: say which file.
                self.video_of(run_id)
                raise
            self.remember(run_id, result)
            return result

    def ensure_decoded(self, run_id: str) -> None:
        """Make ``open_run(store, run_id)`` a read of the decode cache: a run whose decode was
        evicted is decoded again in a worker of the pool (a decoder crash must not end the
        app), which caches it. Without a pool, open_run decodes in this process."""
        if self.pool is None or decode_is_cached(self.store, run_id, memory=self._memory):
            return
        from app import jobs
        from app.workers import job_store, run_job

        video = Path(self.store.get_run(run_id).video_path).name
        run_job(self.pool, jobs.restore_decode, job_store(self), run_id, subject=video)

    def video_of(self, run_id: str) -> Path:
        """The video of stored run ``run_id``, which must still exist.

        Raises
        ------
        InputError : the video was deleted or moved since the run ("… no longer exists").
        StoreError : no such run.
        """
        video = Path(self.store.get_run(run_id).video_path)
        if not video.is_file():
            raise InputError("no longer exists (deleted or moved since it was run)", path=video, stage="open")
        return video

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def make_workspace(
    *,
    session_db: Path | None = None,
    input_dirs: tuple[Path, ...] = (),
    output_dir: Path | None = None,
) -> Workspace:
    """A Workspace with the app's default folders: inputs from the sample folder, the given
    folders and the uploads folder; everything written under ``output_dir``.

    Raises
    ------
    OutputError : the work folder cannot be created or written.
    """
    output_root = Path(output_dir or DEFAULT_HOME / "work").expanduser().resolve()
    check_work_folder(output_root)
    roots = (output_root, SAMPLE_VIDEO.parent, *input_dirs)
    return Workspace(
        store_path=Path(session_db or DEFAULT_HOME / "sessions.duckdb").expanduser(),
        # Once each, in order: an --allow-dir that is also the video's folder is named once.
        input_roots=tuple(dict.fromkeys(Path(r).expanduser().resolve() for r in roots)),
        output_root=output_root,
    )


def check_work_folder(folder: Path) -> None:
    """Create ``folder`` and its uploads folder and write a file there, so that an unusable work
    folder is one error at start rather than a failed upload or export later (OutputError)."""
    try:
        (folder / UPLOADS_DIR).mkdir(parents=True, exist_ok=True)
        # A real write: permission bits say nothing for root or on a read-only file system.
        handle, probe = tempfile.mkstemp(prefix=".write-check-", dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(
            f"cannot use the work folder ({exc.strerror or exc}; choose another with --work-dir)",
            path=folder,
            stage="workspace",
        ) from exc


def ensure_run(ws: Workspace, video: str | Path, options: Any = None) -> str:
    """The id of a finished run of ``video`` with ``options`` (default clean), running it if needed."""
    from backend.pipeline import SelectionOptions
    from backend.runs import select_and_store
    from backend.selectors import selector_of

    options = options or SelectionOptions(profile="clean")
    path = ws.input_path(video)
    wanted = options.as_dict()
    selector = selector_of(options)
    for row in ws.store.list_runs(status="done"):
        same = row.selector == selector and all(row.config.get(k) == v for k, v in wanted.items())
        if row.video_path == str(path) and same:
            return row.run_id
    if ws.pool is not None:  # native work runs in a worker process (app.workers)
        from app import jobs
        from app.workers import job_store, run_job
        from backend.isolation import Cleanup

        done = run_job(
            ws.pool,
            jobs.select_run,
            str(path),
            job_store(ws),
            options,
            subject=path.name,
            cleanup=Cleanup(store=ws.store),
        )
        return str(done["run_id"])
    from backend.selectors.fallback import default_fallback

    run_id, result = select_and_store(path, ws.store, options=options, fallback=default_fallback(options))
    ws.remember(run_id, result)
    return run_id


def upload_name(upload: Any) -> str:
    """The file name of a Gradio upload (a path string or a file object)."""
    return Path(upload if isinstance(upload, str) else upload.name).name


def store_upload(ws: Workspace, upload: Any) -> Path:
    """Copy an uploaded file (a Gradio path or file object) into the uploads folder; its new path.

    Raises
    ------
    OutputError : the copy failed (naming the upload, not its copy); a partial copy is removed.
    """
    src = Path(upload if isinstance(upload, str) else upload.name)
    folder = ws.output_path(UPLOADS_DIR)
    dest = folder / src.name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    except OSError as exc:
        if not isinstance(exc, shutil.SameFileError):  # the source itself is never removed
            dest.unlink(missing_ok=True)
        raise OutputError(f"cannot store the upload ({exc.strerror or exc})", path=src.name) from exc
    return dest
