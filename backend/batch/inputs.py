"""A batch's input: the videos of a folder (found by content), of a list of paths, or of a manifest.

Nothing here decodes: a file is taken for a video when its first bytes are those of a video
container or elementary stream (:func:`sniff_container`); the pipeline's probe then has the
last word, and a file it rejects becomes a ``failed`` row like any other bad video.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from backend.errors import InputError

VIDEO_SUFFIXES = frozenset(
    ".mp4 .m4v .mov .mkv .webm .avi .ts .m2ts .mts .mpg .mpeg .flv .wmv .asf .3gp .ogv .ivf .h264 .264 .h265 "
    ".265 .hevc .y4m".split()
)
"""Names that promise a video: such a file whose content is not one is a ``failed`` row, not ignored."""
MANIFEST_SUFFIXES = (".jsonl", ".csv")
_HEAD_BYTES = 4096
_MP4_BOXES = {b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"pnot"}


def sniff_container(head: bytes) -> str | None:
    """The container or stream a file's first bytes announce, or None.

    ``mp4`` (ISO-BMFF and QuickTime boxes), ``matroska`` (also WebM), ``mpegts`` (a 0x47 sync
    byte every 188 or 192 bytes), ``mpeg-ps``, ``avi``, ``flv``, ``asf``, ``ogg``, ``ivf``,
    ``y4m``, ``h264``/``hevc`` (an Annex-B start code before a parameter set or delimiter).
    An MP4 holding only audio passes here; the probe then reports it has no video stream.
    """
    if len(head) >= 8 and head[4:8] in _MP4_BOXES:
        return "mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "matroska"
    for packet in (188, 192):
        offset = 4 if packet == 192 else 0
        syncs = [offset + k * packet for k in range(3)]
        if len(head) > syncs[-1] and all(head[s] == 0x47 for s in syncs):
            return "mpegts"
    if head.startswith((b"\x00\x00\x01\xba", b"\x00\x00\x01\xb3")):
        return "mpeg-ps"
    if head.startswith(b"RIFF") and head[8:12] == b"AVI ":
        return "avi"
    if head.startswith(b"FLV\x01"):
        return "flv"
    if head.startswith(b"\x30\x26\xb2\x75\x8e\x66\xcf\x11"):
        return "asf"
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"DKIF"):
        return "ivf"
    if head.startswith(b"YUV4MPEG2 "):
        return "y4m"
    for start in (b"\x00\x00\x00\x01", b"\x00\x00\x01"):
        if head.startswith(start) and len(head) > len(start) + 1:
            nal = head[len(start)]
            if nal & 0x80:
                continue
            if nal & 0x1F in (6, 7, 9):  # SEI, SPS, access-unit delimiter
                return "h264"
            if (nal >> 1) & 0x3F in (32, 35, 39):  # VPS, AUD, SEI
                return "hevc"
    return None


@dataclass(frozen=True)
class Entry:
    """One video of the input, or one problem found while listing it.

    ``error`` set: the entry is a ``failed`` row as it stands (an unreadable folder, a file
    with a video's name but not a video's content, a listed path that is not a file, …).
    """

    path: str
    """Absolute path (of the video, or of the folder that could not be read)."""
    rel_path: str
    """Unique POSIX name relative to the input; the output folder is ``videos/<rel_path>``."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Per-video option values from a manifest row (text from CSV)."""
    selector: str | None = None
    preset: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Listing:
    """What the input holds: its entries in order, and what was ignored."""

    kind: str
    """``folder``, ``list`` or ``manifest``."""
    entries: tuple[Entry, ...]
    ignored_files: int = 0
    """Files of a folder that are neither videos by content nor named like one."""
    ignored_columns: tuple[str, ...] = ()
    """Manifest columns that are not options (kept out of the run, e.g. captions)."""


def _head(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.read(_HEAD_BYTES)


def _rel_name(path: Path, root: Path) -> str:
    """POSIX name of ``path`` under ``root``; a path outside it keeps its absolute path under ``_abs/``."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = Path("_abs", *path.parts[1:])
    return PurePosixPath(*rel.parts).as_posix()


def _walk_folder(root: Path) -> Iterator[tuple[Path, OSError | None]]:
    """Every file under ``root`` (sorted, symlinked folders not followed), and each folder that
    could not be listed, with its error."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                children = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            yield folder, exc
            continue
        subfolders = []
        for child in children:
            try:
                if child.is_dir(follow_symlinks=False):
                    subfolders.append(Path(child.path))
                elif child.is_file():
                    yield Path(child.path), None
            except OSError as exc:
                yield Path(child.path), exc
        stack.extend(reversed(subfolders))


def list_folder(root: Path, *, skip: Path | None = None) -> Listing:
    """The videos under folder ``root``, recursively, by content.

    A file is a video when :func:`sniff_container` recognises its first bytes. A file named
    like a video (:data:`VIDEO_SUFFIXES`) whose content is not one, an unreadable file and an
    unreadable folder are ``failed`` entries; every other file is ignored (counted).
    ``skip``: a folder left out (the batch's own output folder, when it lies inside).
    """
    entries: list[Entry] = []
    ignored = 0
    for path, error in _walk_folder(root):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        rel = _rel_name(path, root)
        if error is not None:
            what = "cannot list folder" if path.is_dir() or not path.exists() else "cannot read"
            entries.append(Entry(str(path), rel, error=f"{path}: {what} ({error.strerror or error})"))
            continue
        try:
            head = _head(path)
            kind = sniff_container(head)
        except OSError as exc:
            entries.append(Entry(str(path), rel, error=f"{path}: cannot read ({exc.strerror or exc})"))
            continue
        if kind is not None:
            entries.append(Entry(str(path), rel))
        elif path.suffix.lower() in VIDEO_SUFFIXES:
            what = "is empty (0 bytes)" if not head else "is named like a video, but its content is not one"
            entries.append(Entry(str(path), rel, error=f"{path}: {what}"))
        else:
            ignored += 1
    return Listing("folder", tuple(entries), ignored_files=ignored)


def _listed_entry(text: str, base: Path, line: int, source: Path, **extra: Any) -> Entry:
    path = Path(text).expanduser()
    absolute = path if path.is_absolute() else base / path
    absolute = Path(os.path.normpath(absolute))
    rel = _rel_name(absolute, base)
    if not text.strip():
        return Entry(
            str(source), f"{source.name}:{line}", error=f"{source}: line {line}: empty path", **extra
        )
    return Entry(str(absolute), rel, **extra)


def list_paths(source: Path) -> Listing:
    """The videos of a text file of paths, one a line (relative ones against the file's folder;
    blank lines and lines starting with ``#`` are left out)."""
    base = source.parent.resolve()
    entries = []
    for number, raw in enumerate(_read_text(source).splitlines(), start=1):
        text = raw.strip()
        if text and not text.startswith("#"):
            entries.append(_listed_entry(text, base, number, source))
    return Listing("list", tuple(entries))


def _read_text(source: Path) -> str:
    try:
        return source.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"is not a UTF-8 text file ({exc.reason})", path=source, stage="batch") from exc
    except OSError as exc:
        raise InputError(f"cannot be read ({exc.strerror or exc})", path=source, stage="batch") from exc


def _manifest_rows(source: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(line, row, error) of each record of a JSONL or CSV manifest."""
    text = _read_text(source)
    if source.suffix.lower() == ".jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                yield number, None, f"{source}: line {number}: not JSON ({exc.msg})"
                continue
            if not isinstance(row, dict):
                yield number, None, f"{source}: line {number}: not a JSON object"
                continue
            nested = row.pop("options", None)
            if isinstance(nested, dict):
                row = {**row, **nested}
            yield number, row, None
        return
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or "path" not in reader.fieldnames:
        raise InputError(
            "has no 'path' column (a CSV manifest needs a header row)", path=source, stage="batch"
        )
    for row in reader:
        yield reader.line_num, dict(row), None


def list_manifest(source: Path, option_names: tuple[str, ...]) -> Listing:
    """The videos of a JSONL or CSV manifest: a ``path`` column, optional ``selector`` and
    ``preset`` columns and per-video option columns (named as the options; a JSONL record
    may also hold them in an ``options`` object). Other columns are ignored and reported.

    Raises
    ------
    InputError : unreadable, or a CSV without a ``path`` column.
    """
    base = source.parent.resolve()
    entries = []
    ignored: set[str] = set()
    wanted = set(option_names)
    for number, row, error in _manifest_rows(source):
        if row is None:
            entries.append(Entry(str(source), f"{source.name}:{number}", error=error))
            continue
        path = row.get("path")
        if not isinstance(path, str) or not path.strip():
            entries.append(
                Entry(str(source), f"{source.name}:{number}", error=f"{source}: line {number}: no path")
            )
            continue
        overrides = {k: v for k, v in row.items() if k in wanted and v not in (None, "")}
        ignored |= {k for k in row if k not in wanted and k not in ("path", "selector", "preset")}
        selector = row.get("selector") or None
        preset = row.get("preset") or None
        entries.append(
            _listed_entry(
                path.strip(), base, number, source, overrides=overrides, selector=selector, preset=preset
            )
        )
    return Listing("manifest", tuple(entries), ignored_columns=tuple(sorted(ignored)))


def list_input(source: str | Path, *, option_names: tuple[str, ...], skip: Path | None = None) -> Listing:
    """The videos of a batch input: a folder, a manifest (``.jsonl``/``.csv``) or a list of paths.

    Entries listed twice (the same absolute path) keep their first listing; the later ones
    are ``failed`` entries naming the duplicate.

    Raises
    ------
    InputError : the input does not exist, or a manifest or list cannot be read.
    """
    path = Path(source).expanduser()
    if not path.exists():
        raise InputError("does not exist", path=source, stage="batch")
    path = path.resolve()
    if path.is_dir():
        listing = list_folder(path, skip=skip.resolve() if skip is not None else None)
    elif path.suffix.lower() in MANIFEST_SUFFIXES:
        listing = list_manifest(path, option_names)
    else:
        head = _head(path) if path.is_file() else b""
        if sniff_container(head) is not None:
            raise InputError(
                "is a video; batch takes a folder, a list of paths or a manifest (use select for one video)",
                path=source,
                stage="batch",
            )
        listing = list_paths(path)
    seen: set[str] = set()
    entries = []
    for entry in listing.entries:
        if entry.error is None and entry.path in seen:
            entry = Entry(entry.path, entry.rel_path, error=f"{entry.path}: listed more than once")
        seen.add(entry.path)
        entries.append(entry)
    return Listing(listing.kind, tuple(entries), listing.ignored_files, listing.ignored_columns)
