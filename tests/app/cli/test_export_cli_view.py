"""``codec-lens export`` takes the viewer's settings with its defaults, and its sidecar records them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import run_cli
from PIL import Image

pytestmark = pytest.mark.needs_cvp


@pytest.fixture(scope="module")
def stored(tmp_path_factory, h264_clip: Path) -> tuple[Path, str, object]:
    """A session file with one run of the H.264 test clip: (file, run id, its RunResult)."""
    from backend.pipeline import SelectionOptions
    from backend.runs import select_and_store
    from backend.store import SessionStore

    db = tmp_path_factory.mktemp("cli_view") / "s.duckdb"
    with SessionStore(db) as store:
        run_id, result = select_and_store(h264_clip, store, options=SelectionOptions(num_sampled_frames=24))
    return db, run_id, result


def _export(db: Path, run_id: str, out: Path, *flags: str) -> dict:
    done = run_cli(
        "export", run_id, "--out", out, "--session-db", db, "--frames", "12:13", "--no-stamp", *flags
    )
    assert done.returncode == 0, done.stderr
    return json.loads(Path(str(out) + ".json").read_text())


def test_the_cli_draws_the_viewers_default_view_and_records_it(stored, tmp_path):
    import backend.render as render

    db, run_id, result = stored
    side = _export(db, run_id, tmp_path / "d.png", "--layers", "heatmap,kept", "--size", "processed")
    assert side["view"] == {
        "heat": "block",
        "scale": "frame",
        "colormap": "turbo",
        "opacity": 0.5,
        "layers": ["heatmap", "kept"],
        "crop": None,
        "side": None,
    }
    row = int(np.flatnonzero(result.candidates.frame_indices == 12)[0])
    opts = render.layer_options(("heatmap", "kept"), heat="block")
    viewer = render.draw_frame(result, row, render.plan_overlays(result, options=opts))
    assert np.array_equal(np.asarray(Image.open(tmp_path / "d.png").convert("RGB")), viewer)


def test_heat_cell_and_a_crop(stored, tmp_path):
    db, run_id, _ = stored
    side = _export(
        db, run_id, tmp_path / "c.png", "--layers", "heatmap", "--heat", "cell", "--crop", "100,50,200,100"
    )
    assert side["view"]["heat"] == "cell" and side["view"]["crop"] == [100.0, 50.0, 200.0, 100.0]
    assert side["export_config"]["heat"] == "cell"
    # The source size (640×360 over a processed 504×280 frame): the box's same fractions, x 100 → 127,
    # 300 → 381, y 50 → 64, 150 → 193; the clip frame is padded to an even height.
    assert side["clip"]["pane_crops"] == [[127, 64, 254, 129]]
    assert (
        Image.open(tmp_path / "c.png").size == (254, 130) == (side["clip"]["width"], side["clip"]["height"])
    )


def test_a_bad_heat_or_crop_is_one_line(stored, tmp_path):
    db, run_id, _ = stored
    for flags, message in [
        (("--heat", "tiles"), "Invalid heat ('tiles'). Supported values are block, cell."),
        (("--crop", "1,2,x,4"), "Invalid crop ('1,2,x,4'). Supported values are X,Y,W,H"),
    ]:
        done = run_cli("export", run_id, "--out", tmp_path / "x.png", "--session-db", db, *flags)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert message in done.stderr


def test_the_cli_writes_the_coverage_figure(stored, tmp_path):
    from app.cli.export import PLOTS
    from app.tabs.export_panel import FIGURES
    from views.coverage_figure import prepare_run_coverage_figure
    from views.export_figures import PLOTS as VIEW_PLOTS

    assert PLOTS == VIEW_PLOTS == FIGURES  # the CLI, the views and the Export panel name the same figures
    db, run_id, result = stored
    out = tmp_path / "figs" / "g"
    done = run_cli(
        "export", run_id, "--out", out, "--session-db", db, "--format", "none", "--frames", "24:72",
        "--plots", "coverage", "--plot-format", "html", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    html = out.parent / "g.coverage.html"
    assert json.loads(done.stdout)["files"] == [str(html), str(out.parent / "g.json")]
    # The time axes span the range: frames 24 … 71 of the 24 fps clip.
    expected = prepare_run_coverage_figure(result, frames=(24, 72), paper=True)
    assert tuple(expected.layout.xaxis.range) == pytest.approx((1.0, 3.0))
    page = html.read_text().replace(" ", "")
    ranges = {tuple(float(v) for v in m) for m in re.findall(r'"range":\[([-\d.e]+),([-\d.e]+)\]', page)}
    assert tuple(expected.layout.xaxis.range) in ranges
    assert '"name":"neverobserved"' in page and '"name":"stalenessmap"' in page
