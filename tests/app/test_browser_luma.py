"""The luma-bias tab in headless Chromium: analyse typed paths, refuse paths outside the roots, fit, apply."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.luma_clip_pairs import make_pair
from lens_browser import CHROMIUM, open_page, screenshot, served_app

# The tab needs no codec-video-prep, so unlike the whole app's tests it runs without the cvp wheel.
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason="Debian chromium not installed; run scripts/setup.sh as root"
    ),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory):
    from app.workspace import Workspace

    root = tmp_path_factory.mktemp("luma_app")
    clips = root / "clips"
    make_pair(clips, "a", pattern="moving", gain=0.004, seed=1)
    make_pair(clips, "b", pattern="square", gain=0.004, seed=2)
    (root / "outside.mp4").write_bytes((clips / "a.test.mp4").read_bytes())
    ws = Workspace(store_path=root / "sessions.duckdb", input_roots=(clips,), output_root=root / "out")
    yield ws
    ws.close()


@pytest.fixture(scope="module")
def app_url(workspace, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real app, with no selection run open, served on a free local port."""
    with served_app(workspace, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url:
        yield url


@pytest.fixture(scope="module")
def page(app_url: str) -> Iterator[object]:
    with open_page(app_url) as pg:
        pg.get_by_role("tab", name="Luma bias").click()
        pg.wait_for_selector("#luma_analyze", timeout=60_000)
        yield pg


def _type(page, elem_id: str, text: str) -> None:
    page.locator(f"#{elem_id} textarea, #{elem_id} input").first.fill(text)


def _plot_traces(page, elem_id: str) -> list[str]:
    return page.evaluate(
        f"""() => {{
          const gd = document.querySelector('#{elem_id} .js-plotly-plot');
          return gd && gd.data ? gd.data.map((t) => t.name) : [];
        }}"""
    )


def _wait_plot(page, elem_id: str, trace: str) -> None:
    page.wait_for_function(
        f"""() => {{
          const gd = document.querySelector('#{elem_id} .js-plotly-plot');
          return !!(gd && gd.data && gd.data.some((t) => t.name === {trace!r}));
        }}""",
        timeout=60_000,
    )


def _analyze(page, workspace, name: str) -> None:
    clips = workspace.input_roots[0]
    _type(page, "luma_reference", str(clips / f"{name}.reference.mp4"))
    _type(page, "luma_test", f"{name}.test.mp4")  # relative paths resolve against the first root
    page.locator("#luma_analyze").click()
    page.wait_for_function(
        f"() => document.querySelector('#luma_summary').innerText.includes('{name}.test.mp4')",
        timeout=60_000,
    )


def test_analyze_typed_paths_draws_the_plots_and_the_slot_table(page, workspace) -> None:
    _analyze(page, workspace, "a")
    _wait_plot(page, "luma_bias_plot", "bias vs reference")
    names = _plot_traces(page, "luma_bias_plot")
    assert {"token boundary", "slot 2", "slot 6"} <= set(names)
    _wait_plot(page, "luma_stacked_plot", "mean")
    _wait_plot(page, "luma_gain_plot", "slot 4 fit")
    table = page.locator("#luma_slot_table").inner_text()
    for header in ("slot", "mean bias", "gain b"):
        assert header in table
    rows = workspace.store.list_luma_analyses()
    assert len(rows) == 1 and rows[0]["test_path"].endswith("a.test.mp4")
    # Slot 4's offset of the synthetic decoder (+1.0 level, gain 0 for slot 4) shows in the table.
    assert "0.99" in table or "1.00" in table or "1.0" in table
    assert screenshot(page, "luma_analysis.png").stat().st_size > 20_000


def test_a_path_outside_the_allowed_folders_gives_a_readable_error(page, workspace) -> None:
    clips = workspace.input_roots[0]
    _type(page, "luma_reference", str(clips / "a.reference.mp4"))
    _type(page, "luma_test", "../outside.mp4")
    page.locator("#luma_analyze").click()
    page.wait_for_function(
        "() => document.querySelector('#luma_status').innerText.includes('is outside the allowed folders')",
        timeout=30_000,
    )
    assert "../outside.mp4" in page.locator("#luma_status").inner_text()
    screenshot(page, "luma_outside_error.png")
    assert len(workspace.store.list_luma_analyses()) == 1  # nothing was stored


def _choose(page, elem_id: str, label_part: str) -> None:
    page.locator(f"#{elem_id} input").first.click()
    page.get_by_role("option").filter(has_text=label_part).first.click()


def test_reopen_fit_and_apply(page, workspace) -> None:
    _analyze(page, workspace, "b")
    ids = {Path(r["test_path"]).name: r["analysis_id"] for r in workspace.store.list_luma_analyses()}
    # Reopen the first analysis from the stored list.
    _choose(page, "luma_stored", ids["a.test.mp4"])
    page.keyboard.press("Escape")
    page.locator("#luma_open").click()
    page.wait_for_function(
        f"() => document.querySelector('#luma_summary').innerText.includes('{ids['a.test.mp4']}')",
        timeout=30_000,
    )
    # Fit on b, hold a out.
    _choose(page, "luma_train", ids["b.test.mp4"])
    page.keyboard.press("Escape")
    _choose(page, "luma_heldout", ids["a.test.mp4"])
    page.keyboard.press("Escape")
    page.locator("#luma_fit_btn").click()
    _wait_plot(page, "luma_fit_plot", "after fit")
    assert "231 coefficients" in page.locator("#luma_fit_info").inner_text()
    (fit,) = workspace.store.list_luma_fits()
    assert Path(fit["coeffs_path"]).is_file()
    # Apply the fit (selected after fitting) to analysis a.
    _choose(page, "luma_apply_pick", ids["a.test.mp4"])
    page.locator("#luma_apply_btn").click()
    _wait_plot(page, "luma_before_after", "after")
    _wait_plot(page, "luma_before_after_slots", "after")
    info = page.locator("#luma_apply_info").inner_text()
    assert "re-measured as analysis" in info
    corrected = next(r for r in workspace.store.list_luma_analyses() if r["source"] == "corrected")
    out = Path(corrected["test_path"])
    assert out.is_file() and workspace.output_root in out.parents
    before, after = (float(x) for x in info.split("mean |bias| ")[1].split(" → "))
    assert after < 0.5 * before
    screenshot(page, "luma_fit_apply.png")


def test_refresh_lists_picks_up_analyses_stored_elsewhere(page, workspace) -> None:
    from backend.luma import GopGeometry, analyze_videos, store_analysis

    clips = workspace.input_roots[0]
    analysis = analyze_videos(clips / "b.test.mp4", clips / "b.reference.mp4", geometry=GopGeometry())
    new_id = store_analysis(workspace.store, analysis)  # e.g. by the CLI's --session-db
    page.locator("#luma_refresh").click()
    page.locator("#luma_stored input").first.click()
    page.get_by_role("option").filter(has_text=new_id).first.wait_for(timeout=30_000)
    page.keyboard.press("Escape")


def test_an_upload_lands_in_the_uploads_folder_and_is_analysed(page, workspace) -> None:
    clips = workspace.input_roots[0]
    with page.expect_file_chooser() as chooser:
        page.locator("#luma_official_upload").click()
    chooser.value.set_files(str(clips / "a.reference.mp4"))
    uploaded = workspace.output_root / "uploads" / "a.reference.mp4"
    page.wait_for_function(
        f"() => (document.querySelector('#luma_official textarea, #luma_official input') || {{}}).value"
        f" === {str(uploaded)!r}",
        timeout=30_000,
    )
    assert uploaded.is_file()
    _analyze(page, workspace, "a")
    page.wait_for_function(
        "() => document.querySelector('#luma_summary').innerText.includes('vs official')", timeout=60_000
    )
    _wait_plot(page, "luma_bias_plot", "bias vs official")
    row = workspace.store.list_luma_analyses()[0]
    assert row["official_path"] == str(uploaded)
