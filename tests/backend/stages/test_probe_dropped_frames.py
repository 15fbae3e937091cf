"""A header that counts dropped frames is no cut file: an AVI with an empty (skipped) frame opens."""

from __future__ import annotations

from pathlib import Path

import gradio
import pytest

from backend.stages.probe import ProbeConfig, probe

# Gradio's own sample (Apache-2.0, installed with the app): MPEG-4 Part 2 in AVI, 480×270, whose
# index lists 151 frames, one of them an empty chunk (a dropped frame: pts 1 is missing).
GRADIO_AVI = Path(gradio.__file__).parent / "media_assets" / "videos" / "b.avi"


@pytest.mark.skipif(not GRADIO_AVI.is_file(), reason=f"{GRADIO_AVI} is not installed")
def test_an_avi_with_a_dropped_frame_counts_its_packets():
    info = probe(GRADIO_AVI, config=ProbeConfig(profile="clean"))
    assert (info.total_frames, info.frame_count_source) == (150, "counted")
    assert info.packet_size_bytes.size == 150
