"""The app's server: its frame, info, re-selection and script routes beside Gradio's; serving and launch."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import orjson
from fastapi import Query, Request, Response
from pydantic import BaseModel, Field

from app.main import CSS, build_app, stop_pool
from app.static import PAGE_SCRIPT, script_path
from app.tabs.compare import PaneControls, PaneRequest
from app.tabs.inspect import FrameRequest, ViewSettings
from app.workspace import SAMPLE_VIDEO, Workspace, ensure_run, make_workspace
from backend.errors import CodecLensError

STATIC_ROUTE = "/lens/static"
# The page's script is a file the page loads through its head (Gradio adds the head's elements to
# the document once the app starts), served by the route below behind the same login as the rest.
LAUNCH_KWARGS = {"head": f'<script src="{STATIC_ROUTE.lstrip("/")}/{PAGE_SCRIPT}.js"></script>', "css": CSS}
LOOPBACK_NAMES = ("localhost",)
"""Host names that always mean this machine (besides the loopback addresses, 127.0.0.0/8 and ::1)."""
DEFAULT_MAX_UPLOAD_MB = 2048
_GRADIO_API = "/gradio_api"  # gradio.route_utils.API_PREFIX: where its login check lives


class ServeError(CodecLensError, RuntimeError):
    """The app cannot serve as asked: its port is taken, its host needs a login, a bad auth file."""


class FrameQuery(BaseModel):
    """The query of ``/lens/frame`` and ``/lens/native`` (short names keep the page's URLs short)."""

    run: str = Field(max_length=64)
    row: int = Field(0, ge=0)
    l: str = Field("", max_length=200)  # noqa: E741 - the layers, comma-separated
    o: float = Field(0.5, ge=0.0, le=1.0)
    c: str = Field("turbo", max_length=32)
    s: str = Field("frame", max_length=16)
    h: str = Field("block", max_length=16)
    f: str = Field("", max_length=16)
    """A frame index: the candidate nearest it (A/B flip)."""
    k: str = Field("", max_length=32)
    """Codec layers: mv, qp."""

    def request(self) -> FrameRequest:
        """The frame this query asks for."""
        view = ViewSettings(self.l, self.o, self.c, self.s, self.h)
        return FrameRequest(self.run, self.row, view, frame=self.f or None, codec=self.k)


class PaneQuery(BaseModel):
    """The query of ``/lens/pane`` (one pane's image) and ``/lens/pane_info`` (every pane's
    caption): the comparison, the slider position, the pane and the view controls every pane shares."""

    cmp: str = Field(max_length=64)
    pos: int = Field(0, ge=0)
    i: int = Field(0, ge=0, le=16)
    l: str = Field("", max_length=200)  # noqa: E741 - the layers, comma-separated
    o: float = Field(0.5, ge=0.0, le=1.0)
    c: str = Field("turbo", max_length=32)
    s: str = Field("frame", max_length=16)
    d: int = Field(0, ge=0, le=1)
    """Difference mode against the reference pane ``r``."""
    r: str = Field("", max_length=8)

    def request(self) -> PaneRequest:
        """The pane this query asks for."""
        layers = [x for x in self.l.split(",") if x]
        controls = PaneControls(
            layers=layers,
            opacity=self.o,
            colormap=self.c,
            scale=self.s,
            difference=bool(self.d),
            reference=self.r,
        )
        return PaneRequest(self.cmp, self.pos, controls, pane=self.i)


class LiveBody(BaseModel):
    """A live re-selection asked by the page (app/static/inspect_live.js): the open run, the viewer
    it keeps (candidate row, layers, opacity, colormap, heatmap scale and source) and the live
    options by name (those not named keep the run's values)."""

    run: str = Field(max_length=64)
    row: int = Field(ge=0)
    layers: list[str] = Field(max_length=16)
    opacity: float = Field(ge=0.0, le=1.0)
    colormap: str = Field(max_length=32)
    scale: str = Field(max_length=16)
    heat: str = Field(max_length=16)
    options: dict[str, int | float | str | bool | None] = Field(max_length=32)


Reselect = Callable[[dict[str, Any]], tuple[dict[str, Any], Callable[[], None] | None]]
"""What ``/lens/reselect`` calls: the answer (``{"outputs": ...}`` or ``{"error": ...}``) and
what to run once it is sent."""


def is_loopback(host: str) -> bool:
    """True when ``host`` serves this machine only (127.0.0.0/8, ::1, ``localhost``)."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def read_auth_file(path: str | Path) -> list[tuple[str, str]]:
    """The ``(user, password)`` accounts of an auth file: one ``user:password`` per line.

    Blank lines are skipped; the password is everything after the first colon, as written.

    Raises
    ------
    ServeError : the file cannot be read, holds no account, or a line is not ``user:password``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ServeError(f"cannot read the auth file ({reason or exc})", path=path, stage="serve") from exc
    accounts: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        user, colon, password = line.partition(":")
        if not colon or not user.strip() or not password:
            # The line itself is not shown: it may hold a password.
            raise ServeError(f"line {number} is not user:password", path=path, stage="serve")
        accounts.append((user.strip(), password))
    if not accounts:
        raise ServeError("holds no user:password line", path=path, stage="serve")
    return accounts


def check_access(host: str, auth: Sequence[tuple[str, str]] | None) -> None:
    """Refuse to serve beyond this machine without a login (ServeError)."""
    if auth is None and not is_loopback(host):
        raise ServeError(
            f"--host {host} serves beyond this machine, which needs a login: give --auth-file FILE "
            "with user:password lines (or serve on 127.0.0.1)",
            stage="serve",
        )


def _port_in_use(host: str, port: int) -> ServeError:
    return ServeError(f"port {port} on {host} is in use; pick another with --port", stage="serve")


def check_port(host: str, port: int) -> None:
    """Check that the app can listen on ``host``:``port`` before it starts (ServeError if not).

    The server binds again when it starts; this turns the usual failures into one line first.
    """
    name = host.strip().strip("[]")
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ServeError(f"cannot resolve --host {host} ({exc})", stage="serve") from exc
    except OverflowError as exc:
        raise ServeError(f"port {port} is not a port number (1 to 65535)", stage="serve") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        # As uvicorn binds: a port left in TIME_WAIT by an earlier server is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise _port_in_use(host, port) from exc
            reason = exc.strerror or exc
            raise ServeError(f"cannot listen on {host}:{port} ({reason})", stage="serve") from exc


def login_required(app: Any) -> Callable[..., Any]:
    """A FastAPI dependency that admits a request only when Gradio's own login would.

    It calls Gradio's ``/gradio_api/user`` and ``/gradio_api/login_check`` handlers, so the
    session cookie, the accounts and the 401 answer are Gradio's: there is one login.
    """
    resolved: list[tuple[Callable[..., Any], Callable[..., Any]]] = []  # looked up on first use

    async def check(request: Request) -> None:
        if app.auth is None and getattr(app, "auth_dependency", None) is None:
            return
        if not resolved:
            resolved.append(gradio_login_endpoints(app))
        current_user, login_check = resolved[0]
        login_check(await current_user(request))  # raises Gradio's 401

    return check


def gradio_login_endpoints(app: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Gradio's ``get_current_user(request)`` and ``login_check(user)`` route handlers of ``app``.

    Raises
    ------
    ServeError : this Gradio has no such routes (its login could not be reused).
    """
    found = dict(_route_endpoints(app.router.routes))
    user, check = found.get(f"{_GRADIO_API}/user"), found.get(f"{_GRADIO_API}/login_check")
    if user is None or check is None:
        raise ServeError("this Gradio has no login check to protect the app's routes with", stage="serve")
    return user, check


def _route_endpoints(routes: Sequence[Any], prefix: str = "") -> Any:
    """(path, handler) of every route, into included routers too (FastAPI ≥ 0.16x keeps an
    included router as one lazy route holding the original)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            context = getattr(route, "include_context", None)
            yield from _route_endpoints(inner.routes, prefix + getattr(context, "prefix", ""))
        elif getattr(route, "endpoint", None) is not None:
            yield prefix + route.path, route.endpoint


def static_script(name: str) -> Response:
    """``/lens/static/<name>.js``: a script of app/static (404 for a name that is none)."""
    path = script_path(name)
    if path is None:
        return Response(f"no script {name}.js", status_code=404, media_type="text/plain")
    # Revalidated on every load: the file changes with the app, the page is loaded rarely.
    return Response(path.read_bytes(), media_type="text/javascript", headers={"Cache-Control": "no-cache"})


def mount_frame_routes(
    app: Any,
    render_jpeg: Callable[[FrameRequest], bytes],
    info_fragment: Callable[[str, int], str],
    *,
    render_native: Callable[[FrameRequest], bytes] | None = None,
    block: Callable[..., dict[str, Any]] | None = None,
    reselect: Reselect | None = None,
    panes: Any = None,
) -> None:
    """``/lens/frame`` (a rendered frame as JPEG), ``/lens/info`` (its info line),
    ``/lens/static/<name>.js`` (the page's scripts, app/static) and, when given,
    ``/lens/native`` (the frame decoded at its source size), ``/lens/block`` (the readout of
    the block under a pixel, JSON), ``/lens/reselect`` (a live re-selection, JSON in and out:
    :class:`LiveBody`, then the view's new values or ``{"error": one line}`` with status 400) and,
    with ``panes`` (app.tabs.compare.PaneRoutes), ``/lens/pane`` (one Compare pane as JPEG) and
    ``/lens/pane_info`` (every pane's caption, JSON ``{"captions": [...]}``) on ``app``.

    With a login (``launch(auth=...)``) every route answers 401 to a request without Gradio's
    session cookie, as Gradio's own routes do.
    """
    from fastapi import Depends
    from fastapi.responses import JSONResponse
    from starlette.background import BackgroundTask

    def image_route(draw: Callable[[FrameRequest], bytes]) -> Callable[..., Response]:
        def image(query: Annotated[FrameQuery, Query()]) -> Response:
            return jpeg_response(draw, query.request())

        return image

    def info(run: str = Query(..., max_length=64), row: int = Query(..., ge=0)) -> Response:
        t0 = time.perf_counter()
        try:
            text = info_fragment(run, row)
        except (CodecLensError, ValueError) as exc:
            return Response(str(exc).splitlines()[0], status_code=404, media_type="text/plain")
        headers = {
            "Cache-Control": "private, max-age=3600",
            "Server-Timing": f"info;dur={(time.perf_counter() - t0) * 1000:.1f}",
        }
        return Response(text, media_type="text/html", headers=headers)

    def block_readout(
        run: str = Query(..., max_length=64),
        row: int = Query(0, ge=0),
        x: int = Query(..., ge=0, le=1 << 16),
        y: int = Query(..., ge=0, le=1 << 16),
        n: int = Query(0, ge=0, le=1),
        f: str = Query("", max_length=16),
        h: str = Query("block", max_length=16),
    ) -> Response:
        assert block is not None
        try:
            data = block(run, row, x, y, native=bool(n), frame=f or None)
        except (CodecLensError, ValueError) as exc:
            return Response(str(exc).splitlines()[0], status_code=404, media_type="text/plain")
        return JSONResponse(data, headers={"Cache-Control": "private, max-age=3600"})

    def live(body: LiveBody) -> Response:
        assert reselect is not None
        t0 = time.perf_counter()
        try:
            answer, finish = reselect(body.model_dump())
        except (CodecLensError, ValueError) as exc:
            answer, finish = {"error": str(exc).splitlines()[0]}, None
        parts = answer.pop("timing", {})
        body_bytes = orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)
        # Its parts after the whole (the page's bench reads each: bench/browser.py).
        timing = [f"reselect;dur={(time.perf_counter() - t0) * 1000:.1f}"]
        timing += [f"{name};dur={ms}" for name, ms in parts.items()]
        # The session file is closed after the answer is sent (50-200 ms the page need not wait for).
        return Response(
            body_bytes,
            status_code=400 if "error" in answer else 200,
            media_type="application/json",
            headers={"Server-Timing": ", ".join(timing)},
            background=BackgroundTask(finish) if finish is not None else None,
        )

    login = [Depends(login_required(app))]
    app.add_api_route(f"{STATIC_ROUTE}/{{name}}.js", static_script, methods=["GET"], dependencies=login)
    app.add_api_route("/lens/frame", image_route(render_jpeg), methods=["GET"], dependencies=login)
    app.add_api_route("/lens/info", info, methods=["GET"], dependencies=login)
    if render_native is not None:
        app.add_api_route("/lens/native", image_route(render_native), methods=["GET"], dependencies=login)
    if block is not None:
        app.add_api_route("/lens/block", block_readout, methods=["GET"], dependencies=login)
    if reselect is not None:
        app.add_api_route("/lens/reselect", live, methods=["POST"], dependencies=login)
    if panes is not None:
        mount_pane_routes(app, panes, login)


def jpeg_response(draw: Callable[..., bytes], *args: Any) -> Response:
    """``draw(*args)`` as a JPEG answer (404 with the error's first line when it cannot be drawn)."""
    t0 = time.perf_counter()
    try:
        data = draw(*args)
    except (CodecLensError, ValueError) as exc:
        return Response(str(exc).splitlines()[0], status_code=404, media_type="text/plain")
    headers = {
        # A URL names one immutable frame of one stored run: let the browser keep it.
        "Cache-Control": "private, max-age=3600",
        # Render time, visible in the browser's resource timing (bench/scrub.py reads it).
        "Server-Timing": f"render;dur={(time.perf_counter() - t0) * 1000:.1f}",
    }
    return Response(data, media_type="image/jpeg", headers=headers)


def mount_pane_routes(app: Any, panes: Any, dependencies: list[Any]) -> None:
    """The Compare tab's ``/lens/pane`` (one pane as JPEG) and ``/lens/pane_info`` (every pane's
    caption, JSON) on ``app``, answered by ``panes`` (app.tabs.compare.PaneRoutes)."""
    from fastapi.responses import JSONResponse

    def pane(query: Annotated[PaneQuery, Query()]) -> Response:
        return jpeg_response(panes.jpeg, query.request())

    def pane_info(query: Annotated[PaneQuery, Query()]) -> Response:
        try:
            captions = panes.captions(query.request())
        except (CodecLensError, ValueError) as exc:
            return Response(str(exc).splitlines()[0], status_code=404, media_type="text/plain")
        return JSONResponse({"captions": captions}, headers={"Cache-Control": "private, max-age=3600"})

    app.add_api_route("/lens/pane", pane, methods=["GET"], dependencies=dependencies)
    app.add_api_route("/lens/pane_info", pane_info, methods=["GET"], dependencies=dependencies)


def _launch_error(exc: OSError | ValueError, host: str, port: int) -> BaseException:
    """The one-line error for Gradio's launch failures that the port explains, else ``exc``."""
    if isinstance(exc, OSError):
        # Gradio's words for a port taken after check_port: "Cannot find empty port in range".
        if "empty port" in str(exc) or exc.errno == errno.EADDRINUSE:
            return _port_in_use(host, port)
        return ServeError(f"cannot serve on {host}:{port} ({exc.strerror or exc})", stage="serve")
    if "localhost is not accessible" in str(exc):  # its check found nothing answering there
        return ServeError(
            f"port {port} on {host} did not answer once the server started (is it in use? pick another "
            "with --port)",
            stage="serve",
        )
    return exc


def serve(
    demo: Any,
    ws: Workspace,
    *,
    host: str,
    port: int,
    block: bool = True,
    auth: Sequence[tuple[str, str]] | None = None,
    max_upload_mb: float | None = None,
) -> Any:
    """Launch ``demo`` with the frame routes; returns the server app (blocks unless told not to).

    ``auth``: accounts for Gradio's login page, which then guards every route, ours included.
    ``max_upload_mb``: uploads above this size are refused (None: no limit).

    Raises
    ------
    ServeError : the port is taken (or another reason the server did not start).
    KeyboardInterrupt : Ctrl-C while blocking (the server is closed first).
    """
    from gradio.routes import App

    app = App()
    mount_frame_routes(
        app,
        demo.lens_render_jpeg,
        demo.lens_info,
        render_native=getattr(demo, "lens_render_native", None),
        block=getattr(demo, "lens_block", None),
        reselect=getattr(demo, "lens_reselect", None),
        panes=getattr(demo, "lens_panes", None),
    )
    try:
        demo.launch(
            server_name=host,
            server_port=port,
            share=False,
            prevent_thread_lock=True,
            quiet=not block,
            allowed_paths=[str(ws.output_root)],
            auth=list(auth) if auth is not None else None,
            max_file_size=None if max_upload_mb is None else int(max_upload_mb * 1024 * 1024),
            _app=app,
            **LAUNCH_KWARGS,
        )
    except (OSError, ValueError) as exc:
        demo.close(verbose=False)  # whatever part of the server started
        error = _launch_error(exc, host, port)
        if error is exc:
            raise
        raise error from exc
    if auth is not None:
        try:
            gradio_login_endpoints(app)  # fail now rather than leave our routes unguarded
        except ServeError:
            demo.close(verbose=False)
            raise
    if block:
        try:
            # Not demo.block_thread(): it swallows Ctrl-C, and the CLI reports it (exit 130).
            while demo.is_running:
                time.sleep(0.1)
        finally:
            demo.close(verbose=False)
    return app


def make_app_workspace(
    *,
    video: str | None,
    session_db: Path | None = None,
    input_dirs: tuple[Path, ...] = (),
    output_dir: Path | None = None,
) -> Workspace:
    """The app's workspace: the given folders, the current folder and the video's are allowed.

    Raises OutputError when the work folder cannot be created or written.
    """
    dirs = tuple(input_dirs) + ((Path(video).expanduser().resolve().parent,) if video else ())
    return make_workspace(session_db=session_db, input_dirs=(*dirs, Path.cwd()), output_dir=output_dir)


def first_run(ws: Workspace, *, video: str | None, run_id: str | None = None) -> str:
    """The run the app opens on: stored ``run_id``, else a run of ``video`` (default the bundled
    sample), made if there is none. Raises the backend's errors when it cannot be made or opened."""
    from app.main import start_pool

    start_pool(ws)  # the first run (and a decode its open needs) runs in a worker too
    rid = run_id or ensure_run(ws, video or SAMPLE_VIDEO)
    ws.result(rid)
    return rid


def open_workspace(
    *,
    video: str | None,
    run_id: str | None = None,
    session_db: Path | None = None,
    input_dirs: tuple[Path, ...] = (),
    output_dir: Path | None = None,
) -> tuple[Workspace, str]:
    """The app's workspace (:func:`make_app_workspace`) and the run to open (:func:`first_run`).

    Raises the backend's errors when the run cannot be made or opened.
    """
    ws = make_app_workspace(video=video, session_db=session_db, input_dirs=input_dirs, output_dir=output_dir)
    return ws, first_run(ws, video=video, run_id=run_id)


def launch(
    ws: Workspace,
    *,
    run_id: str,
    host: str,
    port: int,
    auth: Sequence[tuple[str, str]] | None = None,
    max_upload_mb: float | None = DEFAULT_MAX_UPLOAD_MB,
) -> int:
    """Build and serve the app over ``ws`` on stored run ``run_id`` (blocks until interrupted).

    Raises ServeError when it cannot serve, KeyboardInterrupt on Ctrl-C (the store closed).
    """
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    check_access(host, auth)
    check_port(host, port)
    try:
        demo = build_app(ws, run_id=run_id)
        serve(demo, ws, host=host, port=port, auth=auth, max_upload_mb=max_upload_mb)
    finally:
        stop_pool(ws)  # here, not at exit: the CLI leaves without running atexit hooks
        ws.close()
    return 0
