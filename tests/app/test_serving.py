"""Serving beyond this machine: a login through Gradio's own, 401 on every route of ours, the
upload limit, and one-line refusals (no auth on a public host, a bad auth file, a port in use)."""

from __future__ import annotations

import http.cookiejar
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run_cli
from helpers.paths import REPO_ROOT
from procfs import alive, children

from app.server import check_access, is_loopback, read_auth_file

# Real app servers and CLI processes: the end-to-end tier, not the unit tier (--fast).
pytestmark = pytest.mark.slow

USER, PASSWORD = "alice", "s3:cr et"  # a colon and a space: the password is all after the first colon


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("codec-lens: error: "), lines
    return lines[0]


# -- refusals before anything is served -----------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("lens.example.org", False),
    ],
)
def test_only_loopback_hosts_count_as_this_machine(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_auth_file_lines_are_user_colon_password(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text(f"{USER}:{PASSWORD}\n\n bob :pw:with:colons\r\n")
    assert read_auth_file(path) == [(USER, PASSWORD), ("bob", "pw:with:colons")]
    check_access("0.0.0.0", read_auth_file(path))  # a login makes a public host fine
    check_access("127.0.0.1", None)


def _bad_auth_file(kind: str, tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / f"{kind}.auth"
    if kind == "no_colon":
        path.write_text(f"{USER}:{PASSWORD}\nbob-without-password\n")
        return path, "line 2 is not user:password"
    if kind == "empty_password":
        path.write_text("bob:\n")
        return path, "line 1 is not user:password"
    if kind == "empty":
        path.write_text("\n  \n")
        return path, "holds no user:password line"
    if kind == "missing":
        return path, "no such file"
    if kind == "directory":  # unreadable for anyone, root included
        path.mkdir()
        return path, "is a directory"
    path.write_bytes(b"\xff\xfe:\x00")
    return path, "not utf-8"


@pytest.mark.parametrize("kind", ["no_colon", "empty_password", "empty", "missing", "directory", "binary"])
def test_a_bad_auth_file_is_one_line(kind: str, tmp_path: Path) -> None:
    path, phrase = _bad_auth_file(kind, tmp_path)
    result = run_cli("app", "--auth-file", path, "--session-db", tmp_path / "s.duckdb", timeout=120)
    line = _one_error_line(result)
    assert str(path) in line and phrase in line.lower(), line
    assert "bob-without-password" not in line  # the file's lines may hold passwords
    assert not (tmp_path / "s.duckdb").exists()  # refused before any run


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_public_host_without_auth_refuses_to_start(host: str, tmp_path: Path) -> None:
    result = run_cli("app", "--host", host, "--session-db", tmp_path / "s.duckdb", timeout=120)
    line = _one_error_line(result)
    assert f"--host {host}" in line and "--auth-file" in line, line
    assert not (tmp_path / "s.duckdb").exists()


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("app", "--port", port, "--session-db", tmp_path / "s.duckdb", timeout=120)
    line = _one_error_line(result)
    assert line == f"codec-lens: error: port {port} on 127.0.0.1 is in use; pick another with --port"
    assert not (tmp_path / "s.duckdb").exists()  # checked before the first run


def test_a_bad_upload_limit_is_one_line(tmp_path: Path) -> None:
    result = run_cli("app", "--max-upload-mb", "0", "--session-db", tmp_path / "s.duckdb")
    assert "--max-upload-mb" in _one_error_line(result)


# -- the running app --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored_run(h264_clip: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A session database with one finished run of the H.264 clip: (database, run id)."""
    db = tmp_path_factory.mktemp("serving") / "sessions.duckdb"
    result = run_cli("select", h264_clip, "--session-db", db, "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    return db, json.loads(result.stdout)["run_id"]


class RunningApp:
    """``codec-lens app`` in a subprocess on a free port, with a cookie-keeping HTTP client."""

    def __init__(self, args: list[str | os.PathLike[str]], tmp_path: Path) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "GRADIO_TEMP_DIR": str(tmp_path / "gradio_tmp")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "app", *map(str, args), "--port", str(self.port)],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            # Ctrl-C reaches it even when the suite runs as a background job (a shell's `&`
            # starts it with SIGINT ignored, which children inherit).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.communicate()[1][-2000:]
            try:
                self.get("/")
                return
            except OSError:
                time.sleep(0.25)
        raise AssertionError("the app did not answer within 120 s")

    def request(
        self, path: str, data: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes, str]:
        req = urllib.request.Request(self.base + path, data=data, headers=headers or {})
        try:
            with self.opener.open(req, timeout=60) as resp:
                return resp.status, resp.read(), resp.headers.get("content-type", "")
        except urllib.error.HTTPError as err:
            return err.code, err.read(), err.headers.get("content-type", "")

    def get(self, path: str) -> tuple[int, bytes, str]:
        return self.request(path)

    def post_json(self, path: str, body: Any, content_type: str = "application/json") -> tuple[int, Any]:
        status, data, _ = self.request(path, json.dumps(body).encode(), {"Content-Type": content_type})
        try:
            return status, json.loads(data)
        except ValueError:
            return status, data.decode(errors="replace")

    def login(self, user: str, password: str) -> int:
        body = urllib.parse.urlencode({"username": user, "password": password}).encode()
        return self.request("/login", body, {"Content-Type": "application/x-www-form-urlencoded"})[0]

    def upload(self, size_bytes: int) -> tuple[int, str]:
        boundary = "lensboundary"
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="clip.mp4"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + b"\0" * size_bytes
            + f"\r\n--{boundary}--\r\n".encode()
        )
        status, data, _ = self.request(
            "/gradio_api/upload", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        )
        return status, data.decode(errors="replace")

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C: the exit code and stderr; the app's worker processes must end with it."""
        workers = children(self.proc.pid)
        self.proc.send_signal(signal.SIGINT)
        stderr = self.proc.communicate(timeout=60)[1]
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in workers if alive(pid)], "worker processes outlived the app"
        return self.proc.returncode, stderr

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)


@pytest.fixture
def start_app(tmp_path: Path) -> Iterator:
    apps: list[RunningApp] = []

    def start(*args: str | os.PathLike[str]) -> RunningApp:
        apps.append(RunningApp(list(args), tmp_path))
        return apps[-1]

    yield start
    for app in apps:
        app.close()


def _our_routes(run_id: str) -> dict[str, str]:
    return {
        "/lens/frame": f"/lens/frame?run={run_id}&row=1&l=kept",
        "/lens/info": f"/lens/info?run={run_id}&row=1",
    }


def _live_body(run_id: str, **options: Any) -> dict[str, Any]:
    """A live re-selection as the page posts it (options not named keep the run's values)."""
    view = {"layers": ["kept"], "opacity": 0.5, "colormap": "turbo", "scale": "frame", "heat": "block"}
    return {"run": run_id, "row": 0, **view, "options": options}


def test_every_custom_route_is_checked() -> None:
    """A route added to app.server without the login dependency fails here."""
    from fastapi import FastAPI

    from app.server import mount_frame_routes

    app = FastAPI()
    mount_frame_routes(
        app,
        lambda *a: b"",
        lambda *a: "",
        render_native=lambda *a: b"",
        block=lambda *a, **k: {},
        reselect=lambda body: ({"outputs": []}, None),
    )
    paths = {r.path for r in app.router.routes if r.path.startswith("/lens/")}
    assert paths == {
        *_our_routes("x"),
        "/lens/native",
        "/lens/block",
        "/lens/reselect",
        "/lens/static/{name}.js",
    }
    for route in app.router.routes:
        if route.path in paths:
            assert [d.call.__name__ for d in route.dependant.dependencies] == ["check"], route.path


def test_the_page_scripts_are_served_as_files() -> None:
    """The page loads its script through the head (app.server.LAUNCH_KWARGS) from app/static."""
    from fastapi.testclient import TestClient
    from gradio.routes import App

    from app.server import LAUNCH_KWARGS, mount_frame_routes
    from app.static import HERE

    app = App()  # no login: Gradio's own check admits every request
    mount_frame_routes(app, lambda *a: b"", lambda *a: "")
    client = TestClient(app)
    got = client.get("/lens/static/page.js")
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/javascript")
    assert got.content == (HERE / "page.js").read_bytes()
    assert '<script src="lens/static/page.js"></script>' == LAUNCH_KWARGS["head"]
    for name in ("nope", "__init__", "..%2Fserver"):
        assert client.get(f"/lens/static/{name}.js").status_code == 404, name


@pytest.mark.needs_cvp
@pytest.mark.slow  # starts the app twice (one select first)
def test_a_public_host_serves_only_after_gradios_login(
    stored_run: tuple[Path, str], tmp_path: Path, start_app
) -> None:
    db, run_id = stored_run
    auth = tmp_path / "users"
    auth.write_text(f"{USER}:{PASSWORD}\n")
    app = start_app(
        "--run", run_id, "--session-db", db, "--work-dir", tmp_path / "work",
        "--host", "0.0.0.0", "--auth-file", auth, "--max-upload-mb", "1",
    )  # fmt: skip
    for path in (*_our_routes(run_id).values(), "/lens/static/page.js", "/config", "/gradio_api/info"):
        assert app.get(path)[0] == 401, path  # ours answer as Gradio's own do
    assert app.upload(10)[0] == 401
    assert app.post_json("/lens/reselect", _live_body(run_id, images_per_group=2))[0] == 401
    assert app.login(USER, "wrong") == 400
    assert app.get(_our_routes(run_id)["/lens/frame"])[0] == 401
    assert app.login(USER, PASSWORD) == 200
    status, data, kind = app.get(_our_routes(run_id)["/lens/frame"])
    assert (status, kind, data[:2]) == (200, "image/jpeg", b"\xff\xd8")
    status, data, _ = app.get(_our_routes(run_id)["/lens/info"])
    assert status == 200 and b"frame" in data
    assert app.get("/config")[0] == 200
    # Uploads: one line over the limit, fine under it.
    status, text = app.upload(1024 * 1024 + 1)
    assert status == 413 and len(text.strip().splitlines()) == 1 and "maximum allowed size" in text, text
    assert app.upload(1000)[0] == 200
    code, stderr = app.interrupt()
    assert code == 130 and [line for line in stderr.splitlines() if line.strip()] == [
        "codec-lens: interrupted"
    ]


@pytest.mark.needs_cvp
@pytest.mark.slow  # starts the app
def test_loopback_needs_no_login(stored_run: tuple[Path, str], tmp_path: Path, start_app) -> None:
    db, run_id = stored_run
    app = start_app("--run", run_id, "--session-db", db, "--work-dir", tmp_path / "work")
    assert app.get(_our_routes(run_id)["/lens/frame"])[0] == 200
    assert app.get(_our_routes(run_id)["/lens/info"])[0] == 200
    status, data, _ = app.get("/lens/info?run=nope&row=0")
    assert status == 404 and b"nope" in data and len(data.splitlines()) == 1
    # The live re-selection route: a new run, a refused value, an unknown run, a form post.
    status, got = app.post_json("/lens/reselect", _live_body(run_id, images_per_group=2))
    assert status == 200, got
    new_id = got["outputs"][1]
    assert new_id != run_id and got["outputs"][0] == new_id  # shown_run, then run_id
    status, got = app.post_json("/lens/reselect", _live_body(run_id, images_per_group=0))
    assert status == 400 and got == {
        "error": "Invalid images per group (0). Supported values are between 1 and 1024."
    }
    status, got = app.post_json("/lens/reselect", _live_body("nope", images_per_group=2))
    assert status == 400 and "nope" in got["error"] and "\n" not in got["error"], got
    status, got = app.post_json("/lens/reselect", _live_body(run_id, num_sampled_frames=9))
    assert status == 400 and got["error"].startswith("Invalid live option (num_sampled_frames)."), got
    # Not JSON (what a page on another site could post without asking): refused unread.
    assert app.post_json("/lens/reselect", _live_body(run_id, images_per_group=3), "text/plain")[0] == 422
    # Another app on the same port: one line, not Gradio's traceback.
    result = run_cli("app", "--run", run_id, "--session-db", db, "--port", app.port, timeout=120)
    line = _one_error_line(result)
    assert f"port {app.port} on 127.0.0.1 is in use" in line
    code, stderr = app.interrupt()
    assert code == 130, stderr
