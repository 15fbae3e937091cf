"""Listing a batch's input: videos found by content, lists of paths, manifests with per-video options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.batch.inputs import list_input, sniff_container
from backend.batch.unit import option_names
from backend.errors import InputError

REPO = Path(__file__).resolve().parents[3]
REAL_MP4 = REPO / "tests" / "data" / "real_h264_film_friday.mp4"
REAL_TS = REPO / "tests" / "data" / "real_hevc_bbb_1080p.ts"
OPTIONS = option_names("cvp")


def _head(path: Path) -> bytes:
    return path.read_bytes()[:4096]


def test_sniff_recognises_real_containers_and_refuses_text() -> None:
    assert sniff_container(_head(REAL_MP4)) == "mp4"
    assert sniff_container(_head(REAL_TS)) == "mpegts"
    assert sniff_container(b"\x1a\x45\xdf\xa3" + b"\0" * 60) == "matroska"
    assert sniff_container(b"\x00\x00\x00\x01\x67\x64" + b"\0" * 20) == "h264"  # Annex-B SPS
    assert sniff_container(b"\x00\x00\x00\x01\x40\x01" + b"\0" * 20) == "hevc"  # Annex-B VPS
    assert sniff_container(b"This is a text file with a video extension.\n" * 4) is None
    assert sniff_container(b"") is None
    assert sniff_container(b"\x00" * 64) is None


def _tree(root: Path) -> None:
    (root / "nested" / "deeper").mkdir(parents=True)
    (root / "clip.mp4").write_bytes(REAL_MP4.read_bytes())
    (root / "nested" / "renamed.bin").write_bytes(REAL_MP4.read_bytes())  # a video by content
    (root / "nested" / "deeper" / "clip.mp4").write_bytes(REAL_MP4.read_bytes())
    (root / "nested" / "fake.mp4").write_text("not a video\n")
    (root / "nested" / "empty.mkv").write_bytes(b"")
    (root / "README.md").write_text("# notes\n")


def test_a_folder_lists_videos_by_content_with_unique_relative_names(tmp_path: Path) -> None:
    _tree(tmp_path)
    listing = list_input(tmp_path, option_names=OPTIONS)
    by_rel = {e.rel_path: e for e in listing.entries}
    assert listing.kind == "folder"
    assert sorted(by_rel) == [
        "clip.mp4",
        "nested/deeper/clip.mp4",
        "nested/empty.mkv",
        "nested/fake.mp4",
        "nested/renamed.bin",
    ]
    assert listing.ignored_files == 1  # README.md
    assert by_rel["nested/renamed.bin"].error is None
    assert by_rel["clip.mp4"].path == str(tmp_path / "clip.mp4")
    assert "its content is not one" in by_rel["nested/fake.mp4"].error
    assert by_rel["nested/fake.mp4"].error.startswith(str(tmp_path / "nested" / "fake.mp4"))
    assert "is empty" in by_rel["nested/empty.mkv"].error


def test_the_output_folder_inside_the_input_is_left_out(tmp_path: Path) -> None:
    _tree(tmp_path)
    out = tmp_path / "out"
    (out / "videos").mkdir(parents=True)
    (out / "videos" / "copy.mp4").write_bytes(REAL_MP4.read_bytes())
    rels = [e.rel_path for e in list_input(tmp_path, option_names=OPTIONS, skip=out).entries]
    assert not any(r.startswith("out/") for r in rels)


def test_a_text_list_resolves_against_its_folder_and_flags_duplicates(tmp_path: Path) -> None:
    _tree(tmp_path)
    listing_file = tmp_path / "videos.txt"
    listing_file.write_text(f"# a comment\nclip.mp4\n\n{REAL_MP4}\n./clip.mp4\nmissing.mp4\n")
    listing = list_input(listing_file, option_names=OPTIONS)
    assert listing.kind == "list"
    assert [e.rel_path for e in listing.entries] == [
        "clip.mp4",
        "_abs" + str(REAL_MP4),
        "clip.mp4",
        "missing.mp4",
    ]
    assert [e.error is None for e in listing.entries] == [True, True, False, True]
    assert "listed more than once" in listing.entries[2].error


def test_a_jsonl_manifest_carries_per_video_options_and_ignores_other_columns(tmp_path: Path) -> None:
    _tree(tmp_path)
    manifest = tmp_path / "set.jsonl"
    rows = [
        {"path": "clip.mp4", "num_sampled_frames": 16, "caption": "a flower"},
        {"path": "nested/deeper/clip.mp4", "options": {"profile": "parity"}, "id": 7},
        {"caption": "no path"},
    ]
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    listing = list_input(manifest, option_names=OPTIONS)
    first, second, no_path, broken = listing.entries
    assert first.overrides == {"num_sampled_frames": 16}
    assert second.overrides == {"profile": "parity"}
    assert no_path.error.endswith("line 3: no path")
    assert "line 4: not JSON" in broken.error
    assert listing.ignored_columns == ("caption", "id")


def test_a_csv_manifest_needs_a_path_column(tmp_path: Path) -> None:
    _tree(tmp_path)
    good = tmp_path / "set.csv"
    good.write_text("path,group_size,selector\nclip.mp4,8,cvp\nnested/renamed.bin,,\n")
    entries = list_input(good, option_names=OPTIONS).entries
    assert entries[0].overrides == {"group_size": "8"} and entries[0].selector == "cvp"
    assert entries[1].overrides == {} and entries[1].selector is None
    bad = tmp_path / "bad.csv"
    bad.write_text("video,group_size\nclip.mp4,8\n")
    with pytest.raises(InputError, match="no 'path' column"):
        list_input(bad, option_names=OPTIONS)


def test_a_missing_input_or_a_single_video_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        list_input(tmp_path / "nope", option_names=OPTIONS)
    with pytest.raises(InputError, match="use select for one video"):
        list_input(REAL_MP4, option_names=OPTIONS)
