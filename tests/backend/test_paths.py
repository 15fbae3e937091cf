"""Path sandbox: typed paths and uploads stay inside the allowed folders."""

from __future__ import annotations

import os

import pytest

from backend.errors import InputError, OutputError
from backend.paths import resolve_within


@pytest.fixture
def roots(tmp_path):
    allowed = tmp_path / "allowed"
    (allowed / "clips").mkdir(parents=True)
    (allowed / "clips" / "a.mp4").write_bytes(b"x")
    (tmp_path / "secret.txt").write_text("no")
    return tmp_path, allowed


def test_paths_inside_resolve(roots) -> None:
    _, allowed = roots
    assert resolve_within("clips/a.mp4", [allowed]) == (allowed / "clips" / "a.mp4").resolve()
    assert resolve_within(allowed / "clips" / "a.mp4", [allowed]).name == "a.mp4"
    assert resolve_within("clips/../clips/a.mp4", [allowed]).name == "a.mp4"


@pytest.mark.parametrize(
    "text",
    ["../secret.txt", "clips/../../secret.txt", "../../../../../../etc/passwd", "/etc/passwd", "~/x"],
)
def test_dot_dot_and_absolute_escapes_are_refused(roots, text) -> None:
    _, allowed = roots
    with pytest.raises(InputError, match="outside the allowed folders"):
        resolve_within(text, [allowed])
    with pytest.raises(OutputError, match="outside the allowed folders"):
        resolve_within(text, [allowed], kind="output")


def test_symlinks_cannot_escape(roots) -> None:
    base, allowed = roots
    os.symlink(base / "secret.txt", allowed / "link.mp4")
    with pytest.raises(InputError, match="outside"):
        resolve_within("link.mp4", [allowed])


def test_a_sibling_with_a_common_prefix_is_not_inside(roots) -> None:
    base, allowed = roots
    (base / "allowed2").mkdir()
    with pytest.raises(InputError):
        resolve_within(base / "allowed2", [allowed])


def test_bad_arguments(roots) -> None:
    _, allowed = roots
    with pytest.raises(InputError, match="not a usable path"):
        resolve_within("  ", [allowed])
    with pytest.raises(ValueError, match="Invalid kind"):
        resolve_within("a", [allowed], kind="both")
    with pytest.raises(ValueError, match="Invalid roots"):
        resolve_within("a", [])
