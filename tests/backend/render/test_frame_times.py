"""Times shown for a frame count from the first frame, in every container (issue 27, item 14)."""

from __future__ import annotations

import pytest
from helpers.clips import encode_clip
from helpers.damage import remux

from backend.pipeline import SelectionOptions, run
from backend.render import frame_facts

pytestmark = pytest.mark.needs_cvp


def test_an_mpegts_clip_starts_at_zero_like_an_mp4(tmp_path):
    # A stream whose clock starts at 1.5 s, as broadcast MPEG-TS does.
    mp4 = encode_clip(tmp_path / "h264", codec="h264", frames=20, gop=10)
    ts = remux(mp4, tmp_path / "late.ts", container_format="mpegts", start_offset_secs=1.5)
    result = run(ts, options=SelectionOptions(profile="clean"))
    info = result.info
    # The container's start stays in the record.
    assert info.start_pts_secs > 1.4
    fid, secs, _ = frame_facts(result, 0)
    assert fid == 0 and secs == pytest.approx(0.0)
    last = result.candidates.frame_indices.size - 1
    fid, secs, _ = frame_facts(result, last)
    assert secs == pytest.approx(float(info.packet_pts_secs[fid] - info.start_pts_secs))
    assert secs == pytest.approx(fid / info.fps, abs=0.5 / info.fps)
