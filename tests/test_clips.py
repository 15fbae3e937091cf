"""The test clips decode with PyAV as their recipes say, and bad inputs are what they claim."""

from __future__ import annotations

import hashlib
import re
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from av.video.frame import PictureType
from helpers.clips import Codec, encode_clip, render_frame
from helpers.paths import REAL_CLIP_NAMES, REAL_CLIPS


def _decode(path: Path) -> tuple[list[np.ndarray], list[int], list[str]]:
    """RGB frames, keyframe indices and picture types, in presentation order."""
    frames: list[np.ndarray] = []
    keyframes: list[int] = []
    pict_types: list[str] = []
    with av.open(str(path)) as container:
        for index, frame in enumerate(container.decode(video=0)):
            frames.append(frame.to_ndarray(format="rgb24"))
            if frame.key_frame:
                keyframes.append(index)
            # PyAV 18 reports pict_type as a plain int.
            pict_types.append(PictureType(frame.pict_type).name)
    return frames, keyframes, pict_types


def _packet_keyframes(path: Path, fps: int) -> list[int]:
    """Frame indices of the packets the container flags as keyframes (pts converted to frames)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        start = stream.start_time or 0
        flagged = [
            round((packet.pts - start) * stream.time_base * fps)
            for packet in container.demux(stream)
            if packet.size and packet.is_keyframe
        ]
    return sorted(flagged)


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.mark.parametrize("codec", ["h264", "hevc", "vp9", "av1", "mpeg4"])
def test_encode_clip_frames_size_keyframes(tmp_path: Path, codec: Codec) -> None:
    path = encode_clip(tmp_path / "clip", codec=codec, width=320, height=240, frames=48, gop=16)
    assert path.suffix == (".webm" if codec == "vp9" else ".mp4")

    frames, keyframes, _ = _decode(path)
    assert len(frames) == 48
    assert {f.shape for f in frames} == {(240, 320, 3)}
    assert keyframes == [0, 16, 32]
    assert _packet_keyframes(path, fps=24) == [0, 16, 32]

    # Frames come out in the order they were rendered: each matches its own source frame far
    # better than its neighbours (the moving pattern shifts by several pixels per frame).
    for index in (0, 17, 47):
        own = _psnr(frames[index], render_frame(index, width=320, height=240))
        assert own > 20, f"{codec} frame {index}: {own:.1f} dB"
        for other in (index - 1, index + 1):
            if 0 <= other < 48:
                assert own > _psnr(frames[index], render_frame(other, width=320, height=240)) + 3


def test_clip_metadata(tmp_path: Path) -> None:
    path = encode_clip(tmp_path / "meta", codec="h264", frames=30, fps=30, gop=10)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        assert stream.average_rate == Fraction(30)
        assert stream.frames == 30
        assert stream.codec_context.format.name == "yuv420p"


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_bframes_switch(tmp_path: Path, codec: Codec) -> None:
    with_b = encode_clip(tmp_path / "b2", codec=codec, bframes=2)
    without_b = encode_clip(tmp_path / "b0", codec=codec, bframes=0)
    assert "B" in _decode(with_b)[2]
    assert "B" not in _decode(without_b)[2]


@pytest.mark.parametrize("pattern", ["moving", "square", "static"])
def test_render_frame_is_deterministic(pattern: str) -> None:
    first = render_frame(5, width=64, height=48, pattern=pattern)  # type: ignore[arg-type]
    again = render_frame(5, width=64, height=48, pattern=pattern)  # type: ignore[arg-type]
    later = render_frame(6, width=64, height=48, pattern=pattern)  # type: ignore[arg-type]
    assert first.dtype == np.uint8 and first.shape == (48, 64, 3)
    assert np.array_equal(first, again)
    assert np.array_equal(first, later) == (pattern == "static")


@pytest.mark.parametrize("codec", ["h264", "hevc", "vp9", "av1", "mpeg4"])
def test_encode_is_byte_reproducible(tmp_path: Path, codec: Codec) -> None:
    first = encode_clip(tmp_path / "one", codec=codec, frames=24, gop=12)
    second = encode_clip(tmp_path / "two", codec=codec, frames=24, gop=12)
    assert first.read_bytes() == second.read_bytes()


def test_crf_changes_quality(tmp_path: Path) -> None:
    fine = encode_clip(tmp_path / "fine", codec="h264", frames=12, crf=15)
    coarse = encode_clip(tmp_path / "coarse", codec="h264", frames=12, crf=40)
    assert fine.stat().st_size > 2 * coarse.stat().st_size


def test_fixture_clips(h264_clip: Path, hevc_clip: Path, vp9_clip: Path) -> None:
    for path, codec in ((h264_clip, "h264"), (hevc_clip, "hevc"), (vp9_clip, "vp9")):
        frames, keyframes, pict_types = _decode(path)
        assert len(frames) == 96, path
        assert frames[0].shape == (360, 640, 3), path
        assert keyframes == [0, 48], path
        with av.open(str(path)) as container:
            assert container.streams.video[0].codec_context.name == codec
        assert ("B" in pict_types) == (codec in ("h264", "hevc")), path


def test_bad_inputs_are_what_they_claim(bad_inputs: dict[str, Path]) -> None:
    assert set(bad_inputs) == {
        "empty",
        "notes",
        "cut",
        "cut_front",
        "audio_only",
        "mpeg4",
        "tiny_2x2",
        "odd_642x362",
    }
    assert {name: path.name for name, path in bad_inputs.items()} == {
        "empty": "empty.mp4",
        "notes": "notes.mp4",
        "cut": "cut.mp4",
        "cut_front": "cut_front.mp4",
        "audio_only": "audio_only.m4a",
        "mpeg4": "mpeg4.mp4",
        "tiny_2x2": "tiny_2x2.mp4",
        "odd_642x362": "odd_642x362.mp4",
    }

    assert bad_inputs["empty"].stat().st_size == 0

    assert bad_inputs["notes"].read_text(encoding="utf-8").startswith("This is a text file")
    with pytest.raises(av.error.InvalidDataError):
        av.open(str(bad_inputs["notes"]))

    # The cut file starts like an MP4 (ftyp box) but has lost its index.
    cut = bad_inputs["cut"].read_bytes()
    assert cut[4:8] == b"ftyp" and len(cut) > 1000
    with pytest.raises(av.error.InvalidDataError):
        av.open(str(bad_inputs["cut"]))
    # The faststart cut keeps its index (moov before mdat), so it opens and lists 48 frames,
    # but only some of their packets are left.
    with av.open(str(bad_inputs["cut_front"])) as container:
        stream = container.streams.video[0]
        assert stream.frames == 48
        assert 0 < sum(1 for p in container.demux(stream) if p.size) < 48

    with av.open(str(bad_inputs["audio_only"])) as container:
        assert len(container.streams.video) == 0
        assert [s.codec_context.name for s in container.streams.audio] == ["aac"]

    expected = {"mpeg4": ("mpeg4", 320, 240), "tiny_2x2": ("h264", 2, 2)}
    expected["odd_642x362"] = ("h264", 642, 362)
    for name, (codec, width, height) in expected.items():
        with av.open(str(bad_inputs[name])) as container:
            stream = container.streams.video[0]
            assert stream.codec_context.name == codec, name
            frames = list(container.decode(stream))
        assert frames and (frames[0].width, frames[0].height) == (width, height), name
        assert len(frames) == stream.frames, name


def test_the_real_clips_are_shipped_with_the_bytes_their_readme_lists(real_clips: Path) -> None:
    # The README's sha256 list is the record of what tests/data holds; a bare clone has it all.
    readme = (REAL_CLIPS / "README.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^- (\S+) ([0-9a-f]{64})$", readme, flags=re.MULTILINE))
    assert sorted(listed) == sorted(REAL_CLIP_NAMES)
    for name, sha256 in listed.items():
        assert hashlib.sha256((real_clips / name).read_bytes()).hexdigest() == sha256, name
