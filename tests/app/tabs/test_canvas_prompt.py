"""The Canvases tab's prompt box: the LLaVA-OneVision-2 prompt of the open run's canvases."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.tabs.canvases import CanvasViews, canvas_prompt
from app.workspace import SAMPLE_VIDEO, Workspace, ensure_run, make_workspace
from backend.payload import llava_ov2_payload

pytestmark = [pytest.mark.needs_cvp, pytest.mark.slow]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("prompt")
    workspace = make_workspace(session_db=root / "sessions.duckdb", output_dir=root / "work")
    yield workspace
    workspace.close()


def test_the_prompt_counts_the_image_pads_of_each_timestamped_run(ws: Workspace) -> None:
    run_id = ensure_run(ws, SAMPLE_VIDEO)
    views = CanvasViews(ws)
    text = canvas_prompt(views, run_id)
    result = views.current(run_id)
    payload = llava_ov2_payload(
        result.canvases.src_patch_position,
        canvas_names=[str(i) for i in range(result.canvases.images.shape[0])],
        grid_hw=result.geometry.grid_hw,
        patch=result.geometry.patch,
        fps=result.info.fps,
    )
    lines = text.splitlines()
    assert len(lines) == len(payload.runs) and lines[0].startswith(
        "<0.0 seconds><|vision_start|><|image_pad|>×"
    )
    counts = [int(line.split("×")[1].split("<")[0]) for line in lines]
    assert counts == [n for _, n in payload.runs] and sum(counts) == payload.image_pad_count
    assert canvas_prompt(views, "") == ""
