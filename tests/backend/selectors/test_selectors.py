"""The selector table, options and presets, torch's arithmetic (compiled = numpy), the schema-5 migration."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest

import native
from backend.pipeline import FRONT_OPTIONS, SelectionOptions, run
from backend.pipeline.recipe import StageClock
from backend.runs.decode_cache import cache_key
from backend.selectors import SELECTORS, check_options, options_for, selector_of, spec_of
from backend.selectors.llava_ov2.options import LlavaOv2Options
from backend.selectors.llava_ov2.run import select_llava_ov2
from backend.selectors.presets import PRESETS, preset, preset_values
from backend.selectors.uniform import UniformOptions, select_uniform, uniform_indices
from native import torch_math


def test_every_selector_has_an_options_class_that_is_its_schema() -> None:
    assert SELECTORS.names == ("cvp", "llava-ov2", "onevision", "uniform")
    for spec in SELECTORS.values():
        params = spec.options_cls.__dataclass_params__
        assert params.frozen and spec.options_cls.__dataclass_fields__
        for field in dataclasses.fields(spec.options_cls):
            assert field.kw_only and field.metadata["label"] and field.metadata["help"], (
                spec.name,
                field.name,
            )
        options = spec.options_cls()
        assert selector_of(options) == spec.name and options.canvas_format in ("jpg", "png")
        assert all(hasattr(options, k) for k in spec.front_options)
    with pytest.raises(ValueError, match=r"Invalid selector \('onevision2'\)"):
        SELECTORS.lookup("onevision2")


def test_resumable_runs_share_one_set_of_keywords_and_one_stage_clock() -> None:
    # An unknown keyword is refused before anything is opened, by each resumable selector.
    for fn, options in (
        (run, SelectionOptions()),
        (select_llava_ov2, LlavaOv2Options()),
        (select_uniform, UniformOptions()),
    ):
        with pytest.raises(TypeError, match="'front_cache'"):
            fn("no-such-video.mp4", options=options, front_cache=None)
    seen: list[tuple[str, float]] = []
    clock = StageClock(("a", "b", "c", "d"), lambda n, f: seen.append((n, f)))
    assert clock("c", lambda x, *, y: x + y, 1, y=2) == 3 and clock("a", tuple) == ()
    assert seen == [("c", 0.75), ("a", 0.25)]
    timings = clock.finish()
    assert set(timings) == {"a", "c", "total"} and timings["total"] >= timings["c"] >= 0


def test_options_of_another_selector_are_refused_in_one_line() -> None:
    check_options("llava-ov2", {"score_mode": "mvwarp", "profile": "parity"})
    with pytest.raises(
        ValueError, match=r"^Invalid option \(--num_sampled_frames\) for the llava-ov2 selector"
    ):
        check_options("llava-ov2", {"num_sampled_frames": 3})
    with pytest.raises(ValueError, match=r"\(an option of cvp\)"):
        check_options("uniform", {"grouping_mode": "fixed"})
    assert options_for("llava-ov2", {"gop_mode": "bitcost", "unknown_later": 1}).gop_mode == "bitcost"


def test_cvp_cache_keys_are_those_before_selectors() -> None:
    options = SelectionOptions(num_sampled_frames=48)
    blob = json.dumps(
        {
            "sha256": "c0ffee",
            "decoder": native.versions(),
            "front": {k: getattr(options, k) for k in FRONT_OPTIONS},
            "format": 1,
        },
        sort_keys=True,
    )
    assert cache_key("c0ffee", options) == hashlib.sha256(blob.encode()).hexdigest()[:24]
    # Another selector's key differs even where its options would coincide.
    assert cache_key("c0ffee", LlavaOv2Options()) != cache_key("c0ffee", LlavaOv2Options(profile="parity"))
    assert spec_of(UniformOptions()).cache_options() == UniformOptions.FRONT_OPTIONS


def test_presets_fill_what_is_not_given() -> None:
    assert set(PRESETS) == {"mage-vl", "llava-ov2-release"}
    mage = options_for("cvp", preset_values("mage-vl", {}))
    assert (mage.patch, mage.num_sampled_frames, mage.max_pixels, mage.max_group_frames) == (
        16,
        256,
        150000,
        64,
    )
    release = preset_values("llava-ov2-release", {"profile": "parity"}, total_frames=185)
    assert release["num_sampled_frames"] == 185 and release["max_group_frames"] == 128
    assert release["profile"] == "parity" and release["bitcost_grid"] == "sub"
    assert preset_values("llava-ov2-release", {}, total_frames=4000)["num_sampled_frames"] == 512
    assert all(p.sources for p in PRESETS.values())
    with pytest.raises(ValueError, match=r"Invalid preset \('mage'\)"):
        preset("mage")


def test_uniform_samples_evenly() -> None:
    assert uniform_indices(100, 5).tolist() == [0, 25, 50, 74, 99]  # 24.75 → 25, 49.5 → 50 (even), 74.25 → 74
    assert uniform_indices(4, 10).tolist() == [0, 1, 2, 3]
    assert UniformOptions().profile == "clean"


# --------------------------------------------------------------------------- torch's arithmetic


@pytest.fixture
def no_kernel(monkeypatch: pytest.MonkeyPatch):
    """Run torch_math's numpy fallback (the compiled kernel stays where it was for the other tests)."""

    def run(fn, *args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(torch_math, "_kernel", None)
            return fn(*args, **kwargs)

    return run


@pytest.mark.skipif(not torch_math.COMPILED, reason="the compiled kernel was not built (no C compiler)")
def test_the_compiled_kernel_equals_the_numpy_fallback(no_kernel) -> None:
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, (90, 160, 3), dtype=np.uint8)
    field = rng.normal(0, 4, (90, 160, 2)).astype(np.float32)
    for threads in (1, 2):
        assert np.array_equal(
            torch_math.bilinear(image, (56, 84), torch_threads=threads),
            no_kernel(torch_math.bilinear, image, (56, 84), torch_threads=threads),
        )
        assert np.array_equal(
            torch_math.bilinear_u8(image, (56, 84), torch_threads=threads),
            no_kernel(torch_math.bilinear_u8, image, (56, 84), torch_threads=threads),
        )
    assert np.array_equal(
        torch_math.bilinear(field, (200, 300), torch_threads=2),
        no_kernel(torch_math.bilinear, field, (200, 300), torch_threads=2),
    )
    src = image.astype(np.float32)
    assert np.array_equal(torch_math.warp(src, field), no_kernel(torch_math.warp, src, field))
    luma = torch_math.luma(image)
    assert np.array_equal(luma, no_kernel(torch_math.luma, image))
    assert np.array_equal(torch_math.block_sums(luma, 28), no_kernel(torch_math.block_sums, luma, 28))
    mvs = np.array(
        [[8, 8, 16, 16, 6, -2, 4, -1], [12, 8, 8, 16, 1, 1, 0, 1], [150, 85, 16, 16, -4, 8, 2, -1]], np.int32
    )
    assert np.array_equal(
        torch_math.motion_field(mvs, 90, 160), no_kernel(torch_math.motion_field, mvs, 90, 160)
    )


def test_motion_fields_paint_later_vectors_on_top() -> None:
    # Block 1 (16×16 at (0, 0), 6/4 = 1.5 px right) is overlapped by block 2 (8×16 at x 8…15).
    mvs = np.array([[8, 8, 16, 16, 6, -2, 4, -1], [12, 8, 8, 16, 1, 1, 0, 1]], np.int32)
    field = torch_math.motion_field(mvs, 20, 20)
    assert field[0, 0].tolist() == [1.5, -0.5] and field[0, 8].tolist() == [1.0, 1.0]
    assert field[16, 0].tolist() == [0.0, 0.0]


def test_bilinear_weights_are_torchs() -> None:
    # 4 → 2: each output pixel sits between two inputs, weights 0.5 each.
    i0, i1, l0, l1 = torch_math.source_indices(4, 2)
    assert (i0.tolist(), i1.tolist(), l0.tolist(), l1.tolist()) == ([0, 2], [1, 3], [0.5, 0.5], [0.5, 0.5])
    row = np.array([[[0], [10], [20], [30]]], np.uint8)
    assert torch_math.bilinear(row, (1, 2), torch_threads=2)[0, :, 0].tolist() == [5.0, 25.0]
    # uint8 canvases truncate (torch's .to(uint8)), they do not round.
    image = np.random.default_rng(3).integers(0, 256, (60, 80, 3), dtype=np.uint8)
    exact = torch_math.bilinear(image, (28, 56), torch_threads=2)
    truncated = torch_math.bilinear_u8(image, (28, 56), torch_threads=2)
    assert np.array_equal(truncated, np.floor(np.clip(exact, 0, 255)).astype(np.uint8))
    assert not np.array_equal(truncated, np.rint(exact).astype(np.uint8))


def test_block_sums_add_in_row_major_order_in_float32() -> None:
    values = np.full((28, 56), np.float32(0.1))
    sums = torch_math.block_sums(values, 28)
    sequential = np.float32(0)
    for _ in range(28 * 28):
        sequential = np.float32(sequential + np.float32(0.1))
    expected = np.float32(np.float32(sequential / np.float32(784)) * np.float32(784))
    assert sums.tolist() == [[float(expected), float(expected)]]


# --------------------------------------------------------------------------- the store


def test_schema_5_adds_the_selector_of_each_run(tmp_path) -> None:
    import duckdb

    from backend.store import SCHEMA_VERSION, SessionStore

    db = tmp_path / "v4.duckdb"
    SessionStore.create_version(db, 4)
    con = duckdb.connect(str(db))
    con.execute(
        "INSERT INTO sessions (session_id, video_path, content_sha256, total_frames) "
        "VALUES ('s', 'v', 'x', 9)"
    )
    con.execute(
        "INSERT INTO runs (run_id, session_id, status, config_json) VALUES ('old', 's', 'done', '{}')"
    )
    con.close()
    # Opening for writing migrates: to 5, then the datasets' 6 and the audit columns' 7.
    with SessionStore(db) as store:
        assert store.schema_version() == SCHEMA_VERSION == 7
        new = store.begin_run("s", profile="clean", config={}, versions={}, selector="llava-ov2")
        assert store.get_run(new).selector == "llava-ov2" and store.get_run("old").selector == "cvp"
        assert store.session_total_frames("s") == 9
        assert store.comparison_table("comparison_coverage", "none").empty
