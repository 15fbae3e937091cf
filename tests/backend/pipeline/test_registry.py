"""Stage tables and the quirk table: dispatch by name, choices from the keys, one source per defect."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from backend.config import Registry, Variant
from backend.pipeline import STAGES, VARIANTS, SelectionOptions
from backend.quirks import QUIRKS, quirk, quirk_on, quirk_warning, quirks_of
from backend.stages.decode import DecodeConfig
from backend.stages.group import GroupConfig
from backend.stages.pack import PackConfig
from backend.stages.sample import SampleConfig
from backend.stages.score import ScoreConfig
from backend.stages.signals import SignalConfig

BACKEND = Path(__file__).resolve().parents[3] / "backend"

# (config class, field) → the table whose keys are its choices.
PICKERS = {
    (SampleConfig, "frame_sampling_mode"): "sample",
    (DecodeConfig, "score"): "decode",
    (SignalConfig, "kind"): "signals",
    (ScoreConfig, "normalisation"): "score",
    (GroupConfig, "grouping_mode"): "group",
    (GroupConfig, "readiness_sum_threshold_mode"): "threshold",
    (PackConfig, "packer"): "pack",
}


def _choices(config_class: type, name: str) -> tuple[str, ...]:
    return next(f.metadata["choices"] for f in dataclasses.fields(config_class) if f.name == name)


@pytest.mark.parametrize(("config_class", "field"), list(PICKERS))
def test_option_choices_are_the_registry_keys(config_class, field):
    table = VARIANTS[PICKERS[(config_class, field)]]
    assert _choices(config_class, field) == table.names
    options = {f.name for f in dataclasses.fields(SelectionOptions)}
    if field in options:  # the CLI and the app read SelectionOptions' copy
        assert _choices(SelectionOptions, field) == table.names


@pytest.mark.parametrize("kind", sorted(VARIANTS))
def test_unknown_variant_names_list_the_known_ones(kind):
    table = VARIANTS[kind]
    known = ", ".join(repr(n) for n in table.names)
    with pytest.raises(
        ValueError, match=re.escape(f"Invalid {table.what} ('nope'). Supported values are {known}.")
    ):
        table.lookup("nope")
    for name in table.names:
        assert table.lookup(name).name == name and callable(table.lookup(name).function)


def test_registry_refuses_duplicate_names():
    with pytest.raises(ValueError, match=r"Invalid colour \('red'\)"):
        Registry("colour", [Variant("red", str, "a"), Variant("red", str, "b")])


def test_every_stage_takes_a_keyword_only_config():
    assert STAGES.names == (
        "probe",
        "sample",
        "keyframes",
        "geometry",
        "decode",
        "quality",
        "score",
        "group",
        "select",
        "pack",
    )
    for stage in STAGES.values():
        config = inspect.signature(stage.function).parameters["config"]
        assert config.kind is inspect.Parameter.KEYWORD_ONLY, stage.name
        assert stage.config_class is not None, stage.name
    with pytest.raises(ValueError, match=r"Invalid stage \('render'\)"):
        STAGES.lookup("render")


def test_every_scorer_names_a_known_normalisation():
    normalisers = VARIANTS["score"]
    for scorer in VARIANTS["decode"].values():
        normalisers.lookup(scorer.normalisation)
    assert VARIANTS["decode"].names == ("bitcost", *VARIANTS["signals"].names)


def test_quirk_table_is_the_only_source_of_quirk_warning_codes():
    # Every RunWarning code a quirk records is written in the table only: the stages name the quirk.
    codes = {q.warning for q in QUIRKS.values() if q.warning}
    for path in sorted(BACKEND.rglob("*.py")):
        if path.name == "quirks.py":
            continue
        text = path.read_text()
        for code in codes:
            assert not re.search(rf'RunWarning\(\s*"{code}"', text), (path, code)
    assert quirk_warning("tail_dropped", "m").code == "tail_dropped"
    with pytest.raises(ValueError, match=r"Invalid quirk \('ts_codec_name'\) for a warning"):
        quirk_warning("ts_codec_name", "m")  # no warning: the run fails instead


def test_quirk_lookups():
    assert quirk_on("parity", "tail_dropped") and not quirk_on("clean", "tail_dropped")
    assert quirk_on("clean", "upscaled") and quirk_on("parity", "upscaled")  # clean keeps that one
    with pytest.raises(
        ValueError, match=r"Invalid quirk \('nope'\). Supported values are 'frame_count_estimated'"
    ):
        quirk_on("parity", "nope")
    with pytest.raises(ValueError, match=r"Invalid profile \('fast'\)"):
        quirk_on("fast", "tail_dropped")
    assert quirk("double_resize").cite == "cvp quirk 13"
    assert {q.name for q in quirks_of("clean")} == {
        "keyframes_kept",
        "keyframes_refilled",
        "upscaled",
        "group_padded",
    }
    for q in QUIRKS.values():
        assert q.number is None or f"§18.{q.number}" in q.section, q.name


# --- group limits ---------------------------------------------------------------------------------


def test_clean_refuses_group_limits_it_would_raise():
    with pytest.raises(
        ValueError,
        match=r"Invalid min group frames \(1\) for the clean profile. Supported values are at least 4\.",
    ):
        SelectionOptions(profile="clean", min_group_frames=1)
    with pytest.raises(
        ValueError,
        match=r"Invalid max group frames \(6\) for the clean profile. "
        r"Supported values are at least min group frames \(8\)\.",
    ):
        SelectionOptions(profile="clean", max_group_frames=6)
    SelectionOptions(profile="clean", min_group_frames=4, max_group_frames=4)


def test_parity_accepts_the_limits_cvp_raises():
    # cvp runs max(4, min_group_frames) … max(that, max_group_frames) (spec §11.1).
    for mn, mx in ((1, 64), (3, 2), (8, 6)):
        cfg = GroupConfig(profile="parity", min_group_frames=mn, max_group_frames=mx)
        assert cfg.frame_limits == (max(4, mn), max(max(4, mn), mx))
