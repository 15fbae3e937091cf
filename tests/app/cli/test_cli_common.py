"""app.cli.common: the one mapping of errors to lines and exit codes; the core commands start light."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers.paths import REPO_ROOT

from app.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, error_line, fail_with
from backend.errors import InputError, OutputError


def test_backend_errors_name_their_own_path() -> None:
    assert error_line(InputError("file does not exist", path="/v.mp4"), subject="other") == (
        "/v.mp4: file does not exist"
    )
    # OutputError is an OSError too: its own line wins over the OSError formatting.
    assert error_line(OutputError("not a folder", path="/o")) == "/o: not a folder"


def test_builtin_errors_get_the_subject_when_given() -> None:
    assert error_line(ValueError("Invalid gop (0).")) == "Invalid gop (0)."
    assert error_line(ValueError("Invalid gop (0)."), subject="clip.mp4") == "clip.mp4: Invalid gop (0)."
    missing = FileNotFoundError(2, "No such file or directory", "/x.json")
    assert error_line(missing) == "/x.json: No such file or directory"
    assert error_line(OSError("disk on fire")) == "disk on fire"
    assert error_line(OSError("disk on fire"), subject="clip.mp4") == "clip.mp4: disk on fire"


def test_fail_with_prints_one_line_and_returns_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert fail_with(InputError("bad\nthing", path="p"), note=" (stored)") == EXIT_BAD_INPUT
    assert fail_with(ValueError("x"), code=EXIT_FAILED) == EXIT_FAILED
    assert capsys.readouterr().err.splitlines() == [
        "codec-lens: error: p: bad thing (stored)",
        "codec-lens: error: x",
    ]


def test_core_commands_do_not_import_the_tool_commands() -> None:
    code = (
        "import json, sys, app.cli as c; c.build_parser(['select']); "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('app.cli.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    loaded = json.loads(out.stdout)
    assert loaded == [
        "app.cli.app",
        "app.cli.common",
        "app.cli.reselect",
        "app.cli.select",
        "app.cli.sessions",
    ]
