"""The Dataset tab in headless Chromium: open a stored batch, filter it with SQL, open a video."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers.batch_clips import make_dataset
from lens_browser import BROWSER_MARKS, FIRST_FRAME_JS, open_page, screenshot, served_app

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from app.workspace import make_workspace

    root = tmp_path_factory.mktemp("app")
    ws = make_workspace(session_db=root / "sessions.duckdb", output_dir=root / "work")
    yield ws
    ws.close()


@pytest.fixture(scope="module")
def batch(workspace, tmp_path_factory: pytest.TempPathFactory) -> object:
    """A batch of four tiny clips whose runs are stored in the app's session file."""
    from backend.batch import BatchConfig, plan_batch, run_batch

    folder = tmp_path_factory.mktemp("dataset")
    make_dataset(folder)
    config = BatchConfig(workers=2, session_db=workspace.store_path)
    return run_batch(plan_batch(folder, folder.parent / "batch_out", config=config), config=config)


@pytest.fixture(scope="module")
def page(workspace, batch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with (
        served_app(workspace, gradio_tmp=tmp_path_factory.mktemp("gradio")) as url,
        open_page(url, height=1400) as pg,
    ):
        pg.get_by_role("tab", name="Dataset").click()
        yield pg


ROW_COUNT_JS = "() => document.querySelectorAll('#ds_table [role=row]').length - 1"  # less the header


ONLY_ROW_JS = """(name) => {
  const rows = [...document.querySelectorAll('#ds_table [role=row]')].slice(1);
  return rows.length === 1 && rows[0].innerText.includes(name);
}"""


def _rows(page) -> list[str]:
    """The table's data rows as text (Gradio's grid rows; the first is the header)."""
    return page.locator("#ds_table [role=row]").all_inner_texts()[1:]


def test_a_stored_dataset_opens_filters_and_opens_a_video_in_the_inspector(page, batch, workspace) -> None:
    page.locator("#ds_pick input").first.click()
    page.get_by_role("option").filter(has_text="4 videos").first.click()
    page.keyboard.press("Escape")
    page.locator("#ds_open_pick").click()
    page.get_by_text("4 done").first.wait_for(timeout=30_000)
    page.wait_for_function(f"() => ({ROW_COUNT_JS})() === 4", timeout=30_000)
    page.locator("#ds_hist .js-plotly-plot").first.wait_for(timeout=30_000)
    # A SQL condition over the summary columns narrows the table to the chosen video.
    page.locator("#ds_where textarea, #ds_where input").first.fill(
        "rel_path LIKE '%deeper%' AND status = 'done'"
    )
    page.locator("#ds_apply").click()
    page.wait_for_function(ONLY_ROW_JS, arg="sub/deeper/c.mp4", timeout=30_000)
    assert len(_rows(page)) == 1
    screenshot(page, "dataset_filtered.png")
    # A click on its row opens the stored run in the inspector, without running it again.
    runs_before = len(workspace.store.list_runs())
    row = page.locator("#ds_table [role=row]").filter(has_text="sub/deeper/c.mp4").last
    row.locator("[role=gridcell]").first.click()
    page.wait_for_function(
        "() => (document.querySelector('#summary')?.innerText || '').includes('c.mp4')", timeout=60_000
    )
    page.wait_for_function(FIRST_FRAME_JS, timeout=60_000)
    chosen = next(r for r in batch.rows if r["rel_path"] == "sub/deeper/c.mp4")
    assert page.locator("#run_id textarea, #run_id input").first.input_value() == chosen["run_id"]
    assert len(workspace.store.list_runs()) == runs_before
    screenshot(page, "dataset_opened_in_inspector.png")


def test_a_filter_reading_another_table_is_refused_in_one_line(page) -> None:
    page.get_by_role("tab", name="Dataset").click()
    page.locator("#ds_where textarea, #ds_where input").first.fill("tokens > (SELECT count(*) FROM runs)")
    page.locator("#ds_apply").click()
    page.wait_for_function(
        "() => document.querySelector('#ds_status').innerText.includes('it may read only the summary table')",
        timeout=30_000,
    )
    # No rows of the last accepted condition are left under the refused one.
    page.wait_for_function(f"() => ({ROW_COUNT_JS})() === 0", timeout=10_000)
    # The page stays usable: the condition fixed, the rows are back.
    page.locator("#ds_where textarea, #ds_where input").first.fill("status = 'done'")
    page.locator("#ds_apply").click()
    page.wait_for_function(f"() => ({ROW_COUNT_JS})() === 4", timeout=30_000)
