"""Declared fallbacks on real decodes: a still image, AV1 without bitcost, a mostly broken picture,
stored runs, the CLI, and a batch over a mixed folder that completes every video by default."""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import pytest
from helpers.cli import run_cli_forked
from helpers.clips import encode_frames

from backend.runs import open_run, select_and_store
from backend.selectors import options_for
from backend.selectors.fallback import FallbackConfig, select_with_fallback
from backend.store import SessionStore, read_summary_parquet

pytestmark = [pytest.mark.slow, pytest.mark.needs_cvp]

FILM = Path(__file__).resolve().parents[2] / "data" / "real_h264_film_friday.mp4"
# codec → (encoder, container format, suffix, encoder options)
ENCODERS = {
    "h264": ("libx264", "mp4", ".mp4", {"crf": "23", "g": "30", "bf": "2"}),
    "hevc": ("libx265", "mpegts", ".ts", {"crf": "28", "x265-params": "keyint=30:log-level=none"}),
    "vp9": (
        "libvpx-vp9",
        "webm",
        ".webm",
        {"crf": "32", "b": "0", "g": "30", "deadline": "good", "cpu-used": "5"},
    ),
    "av1": ("libsvtav1", "mp4", ".mp4", {"crf": "35", "preset": "10", "svtav1-params": "keyint=30:scd=0"}),
}


def _film_frames(count: int) -> list[np.ndarray]:
    """The film clip's first ``count`` frames at half size (320×240), RGB."""
    out = []
    with av.open(str(FILM)) as container:
        for frame in container.decode(video=0):
            out.append(np.ascontiguousarray(frame.to_ndarray(format="rgb24")[::2, ::2]))
            if len(out) == count:
                break
    return out


def _encode(path: Path, frames: list[np.ndarray], codec: str) -> Path:
    encoder, container_format, suffix, options = ENCODERS[codec]
    return encode_frames(
        path.with_suffix(suffix), frames, encoder=encoder, options=options, container_format=container_format
    )


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real content (the film clip, 60 frames) in every codec, one still image, and a picture that
    decodes mostly green (what a broken stream shows): 60 frames each."""
    folder = tmp_path_factory.mktemp("fallback_clips")
    frames = _film_frames(60)
    made = {codec: _encode(folder / "mixed" / f"film_{codec}", frames, codec) for codec in ENCODERS}
    made["still"] = _encode(folder / "still", [frames[40]] * 60, "h264")
    green = np.zeros_like(frames[0])
    green[..., 1] = 135
    broken = [frames[i] if i % 4 == 0 else green for i in range(60)]  # three frames in four green
    made["broken"] = _encode(folder / "broken", broken, "h264")
    return made


def test_a_still_image_is_too_flat_to_rank_and_runs_uniform_frames(clips) -> None:
    got = select_with_fallback(clips["still"], options=options_for("cvp", {}), config=FallbackConfig())
    assert (got.fallback.selector_requested, got.fallback.selector_used) == ("cvp", "uniform")
    assert got.fallback.fallback_reason == "flat_scores" and "of a keyframe's bytes" in got.fallback.detail
    assert type(got.options).__name__ == "UniformOptions"
    for name in ("llava-ov2", "onevision"):
        other = select_with_fallback(clips["still"], options=options_for(name, {}), config=FallbackConfig())
        assert other.fallback.fallback_reason == "flat_scores", name
    # The same clip's real content is trusted.
    busy = select_with_fallback(clips["h264"], options=options_for("cvp", {}), config=FallbackConfig())
    assert busy.fallback.fallback_reason is None and busy.fallback.selector_used == "cvp"


def test_av1_has_no_bitcost_so_cvp_ranks_a_signal_or_runs_uniform(clips) -> None:
    options = options_for("cvp", {})
    signal = select_with_fallback(clips["av1"], options=options, config=FallbackConfig(mode="signal"))
    assert signal.fallback.fallback_reason == "no_bitcost"
    assert signal.fallback.selector_used == f"cvp[profile=clean,score={signal.options.score}]"
    assert signal.options.score != "bitcost" and signal.canvases.tokens[:, 7].sum() > 0
    uniform = select_with_fallback(clips["av1"], options=options, config=FallbackConfig(mode="uniform"))
    assert (uniform.fallback.selector_used, uniform.fallback.fallback_reason) == ("uniform", "no_bitcost")
    from backend.stages.decode import OptionFixError

    with pytest.raises(OptionFixError, match="this codec has no bitcost"):
        select_with_fallback(clips["av1"], options=options, config=FallbackConfig(mode="none"))


def test_a_mostly_broken_picture_is_a_damaged_stream(clips) -> None:
    got = select_with_fallback(clips["broken"], options=options_for("cvp", {}), config=FallbackConfig())
    assert got.fallback.fallback_reason == "damaged_stream" and got.fallback.selector_used == "uniform"
    assert "of the candidate frames are bad" in got.fallback.detail


def test_a_stored_fallback_run_reopens_as_it_ran_and_says_why(clips, tmp_path: Path) -> None:
    with SessionStore(tmp_path / "s.duckdb") as store:
        run_id, result = select_and_store(
            clips["av1"], store, options=options_for("cvp", {}), fallback=FallbackConfig()
        )
        row = store.get_run(run_id)
        assert row.selector == "cvp" and row.config["score"] == result.options.score != "bitcost"
        assert row.fallback == result.fallback
        cols = store.query(
            "SELECT selector_requested, selector_used, fallback_reason FROM runs WHERE run_id = ?", [run_id]
        ).iloc[0]
        assert cols.tolist() == ["cvp", result.fallback.selector_used, "no_bitcost"]
        again = open_run(store, run_id)
        assert again.fallback == result.fallback
        assert np.array_equal(again.canvases.tokens, result.canvases.tokens)


def test_select_falls_back_only_when_asked_and_records_it(clips, tmp_path: Path) -> None:
    refused = run_cli_forked("select", clips["av1"], "--out", tmp_path / "none")
    assert refused.returncode == 2 and "this codec has no bitcost (av1)" in refused.stderr
    done = run_cli_forked("select", clips["still"], "--out", tmp_path / "o", "--fallback", "signal", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["selector"], summary["selector_requested"], summary["fallback_reason"]) == (
        "uniform",
        "cvp",
        "flat_scores",
    )
    meta = json.loads((tmp_path / "o" / "meta.json").read_text())["codec_lens"]
    assert (meta["selector_requested"], meta["selector_used"], meta["fallback_reason"]) == (
        "cvp",
        "uniform",
        "flat_scores",
    )
    bad = run_cli_forked("select", clips["still"], "--out", tmp_path / "b", "--fallback", "sometimes")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--fallback" in bad.stderr


def test_a_batch_over_a_mixed_folder_completes_every_video_by_default(clips, tmp_path: Path) -> None:
    folder = clips["h264"].parent
    done = run_cli_forked("batch", folder, "--out", tmp_path / "out", "--json", "--workers", "2")
    assert done.returncode == 0, done.stderr
    rows = read_summary_parquet(tmp_path / "out" / "batch.parquet").set_index("rel_path")
    assert sorted(rows.index) == ["film_av1.mp4", "film_h264.mp4", "film_hevc.ts", "film_vp9.webm"]
    assert (rows["status"] == "done").all() and (rows["valid_tokens"] > 0).all()
    assert set(rows["selector_requested"]) == {"cvp"}
    av1 = rows.loc["film_av1.mp4"]
    assert av1["fallback_reason"] == "no_bitcost" and av1["selector_used"].startswith(
        "cvp[profile=clean,score="
    )
    others = rows.drop(index="film_av1.mp4")
    assert others["fallback_reason"].isna().all() and (others["selector_used"] == "cvp").all()
    # --fallback none: the reference's behaviour, the AV1 video fails in one line.
    strict = run_cli_forked("batch", folder, "--out", tmp_path / "strict", "--json", "--fallback", "none")
    assert strict.returncode == 1
    rows = read_summary_parquet(tmp_path / "strict" / "batch.parquet").set_index("rel_path")
    assert rows.loc["film_av1.mp4", "status"] == "failed"
    assert "this codec has no bitcost (av1)" in rows.loc["film_av1.mp4", "error"]
