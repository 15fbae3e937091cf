"""The selector skeleton: a selector declared in one file runs through run_recipe like the shipped ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from backend.config import param, validate_fields
from backend.errors import PipelineError
from backend.pipeline.recipe import (
    FRONT_RECORDS,
    Front,
    Recipe,
    RunResult,
    SelectorOptions,
    Step,
    StepInput,
    run_recipe,
)
from backend.records import Candidates, FrameQuality, Selection
from backend.selectors import SELECTORS
from backend.selectors.uniform import _decode, _groups, _select
from backend.stages.decode import decoder_thread_count
from backend.stages.geometry import GeometryConfig, resolve_geometry
from backend.stages.pack import PackConfig, pack
from backend.stages.probe import ProbeConfig, probe

# -- a whole selector, as a newcomer would add one: options, steps, one Recipe ---------------------


@dataclass(frozen=True, kw_only=True)
class KeyframeOptions(SelectorOptions):
    """Every bitstream keyframe, whole: a baseline that trusts the encoder's scene cuts."""

    FRONT_OPTIONS = ("max_pixels",)

    max_pixels: int = param(50176, label="Max pixels", help="pixel budget per frame", min=3136, max=10**8)
    images_per_group: int = param(2, label="Per group", help="keyframes per group", min=1, max=64)
    canvas_format: str = param("png", label="Canvas format", help="jpg or png", choices=("jpg", "png"))

    def __post_init__(self) -> None:
        validate_fields(self)

    @property
    def profile(self) -> str:
        return "clean"

    def stage_configs(self) -> dict[str, Any]:
        return {
            "probe": ProbeConfig(profile="clean"),
            "geometry": GeometryConfig(max_pixels=self.max_pixels),
            "pack": PackConfig(images_per_group=self.images_per_group),
        }


def _probe(given: StepInput) -> dict[str, Any]:
    return {"info": probe(given.video, config=given.configs["probe"])}


def _keyframes(given: StepInput) -> dict[str, Any]:
    ids = np.asarray(given["info"].keyframe_indices, np.int32)
    candidates = Candidates(
        frame_indices=ids,
        sampled_frame_indices=ids.copy(),
        keyframe_indices=tuple(ids.tolist()),
        moved=(),
        debug={},
    )
    return {"candidates": candidates}


def _geometry(given: StepInput) -> dict[str, Any]:
    return {"geometry": resolve_geometry(given["info"], config=given.configs["geometry"])}


def _decode_keyframes(given: StepInput) -> dict[str, Any]:
    ids = given["candidates"].frame_indices
    decoded = _decode(given["info"], ids, given["geometry"].processed_hw, threads=decoder_thread_count(1))
    return {
        "decoded": decoded,
        "quality": FrameQuality(good=np.ones(ids.size, bool), reasons=("",) * ids.size),
    }


def _group(given: StepInput) -> dict[str, Any]:
    return {"groups": _groups(int(given["candidates"].frame_indices.size), given.options.images_per_group)}


def _select_all(given: StepInput) -> dict[str, Any]:
    from backend.records import ScoreMaps

    r = given.records
    n = int(r["candidates"].frame_indices.size)
    hb, wb = r["geometry"].grid_hw
    bh, bw = r["geometry"].block_grid_hw
    scores = ScoreMaps(
        grids=tuple(np.zeros((1, 1), np.float32) for _ in range(n)),
        processed_hw=r["geometry"].processed_hw,
        patch_scores=np.zeros((n, hb, wb), np.float32),
        block_scores=np.zeros((n, bh * bw), np.float32),
        iframe_clip_cap=None,
    )
    selection = _select(r["groups"], r["candidates"], r["geometry"], given.options.images_per_group)
    return {"selection": selection, "scores": scores}


def _pack(given: StepInput) -> dict[str, Any]:
    r = given.records
    return {"canvases": pack(r["selection"], r["decoded"], r["geometry"], config=given.configs["pack"])}


KEYFRAMES = Recipe(
    "keyframes",
    front=(
        Step("probe", _probe, ("info",)),
        Step("sample", _keyframes, ("candidates",)),
        Step("geometry", _geometry, ("geometry",)),
        Step("decode", _decode_keyframes, ("decoded", "quality")),
    ),
    back=(
        Step("group", _group, ("groups",)),
        Step("select", _select_all, ("selection", "scores")),
        Step("pack", _pack, ("canvases",)),
    ),
    reuses_scores=False,
)

# -- tests ----------------------------------------------------------------------------------------


def test_a_selector_declared_in_one_file_runs_through_the_skeleton(h264_clip):
    seen: list[tuple[str, float]] = []
    result = run_recipe(
        KEYFRAMES, h264_clip, options=KeyframeOptions(), on_progress=lambda s, f: seen.append((s, f))
    )
    assert isinstance(result, RunResult)
    keyframes = probe(h264_clip, config=ProbeConfig(profile="clean")).keyframe_indices
    assert result.candidates.frame_indices.tolist() == list(keyframes)
    assert len(keyframes) >= 2  # the clip's fixed GOP: several keyframes, so several canvases
    # One whole canvas per kept frame that is not its group's anchor, anchors whole too.
    assert result.canvases.images.shape[0] == len(keyframes)
    assert [s for s, _ in seen] == list(KEYFRAMES.stage_names)
    assert seen[-1][1] == 1.0
    assert set(result.timings_secs) == {*KEYFRAMES.stage_names, "total"}
    tokens = result.canvases.tokens
    assert set(tokens[tokens[:, 7] == 1][:, 0].tolist()) == set(keyframes)


def test_a_cached_front_skips_the_front_steps(h264_clip):
    first = run_recipe(KEYFRAMES, h264_clip, options=KeyframeOptions())
    front = Front(**{name: getattr(first, name) for name in FRONT_RECORDS})
    seen: list[str] = []
    again = run_recipe(
        KEYFRAMES,
        "/no/such/video.mp4",  # never opened: the front is given
        options=KeyframeOptions(images_per_group=1),
        front=front,
        on_progress=lambda s, _f: seen.append(s),
    )
    assert seen == ["group", "select", "pack"]
    assert again.decoded is first.decoded
    assert len(again.groups.specs) == first.candidates.frame_indices.size


def test_a_given_probe_is_not_run_again(h264_clip):
    info = probe(h264_clip, config=ProbeConfig(profile="clean"))
    seen: list[str] = []
    result = run_recipe(
        KEYFRAMES, h264_clip, options=KeyframeOptions(), info=info, on_progress=lambda s, _f: seen.append(s)
    )
    assert result.info is info
    assert "probe" not in seen and "probe" not in result.timings_secs


def test_an_empty_selection_is_one_pipeline_error(h264_clip):
    def nothing(_given: StepInput) -> dict[str, Any]:
        return {"selection": Selection((), ())}

    recipe = Recipe(
        "empty",
        front=KEYFRAMES.front,
        back=(KEYFRAMES.back[0], Step("select", nothing, ("selection",)), KEYFRAMES.back[2]),
        empty_message=lambda records, _cfg: f"{records['candidates'].frame_indices.size} keyframes, no group",
    )
    with pytest.raises(PipelineError, match=r"keyframes, no group") as err:
        run_recipe(recipe, h264_clip, options=KeyframeOptions())
    assert err.value.stage == "select"


def test_unknown_keywords_and_repeated_stage_names_are_refused(h264_clip):
    with pytest.raises(TypeError, match="unexpected keyword argument 'fronts'"):
        run_recipe(KEYFRAMES, h264_clip, options=KeyframeOptions(), fronts=None)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"Invalid recipe \(twice\)"):
        Recipe("twice", front=KEYFRAMES.front, back=(KEYFRAMES.front[0],))


def test_every_shipped_selector_has_typed_options():
    for spec in SELECTORS.values():
        options = spec.options_cls()
        assert isinstance(options, SelectorOptions)
        assert options.profile in ("parity", "clean")
        assert options.replace() == options
        assert all(hasattr(options, name) for name in (*spec.front_options, *spec.score_options))
        assert isinstance(options.stage_configs(), dict)
