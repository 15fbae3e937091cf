"""Model-ready payloads of a run's canvases: LLaVA-OneVision-2's processor inputs, OneVision-Encoder's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.payload.llava_ov2 import LlavaPayload, block_order, llava_ov2_payload, timestamp_prompt
from backend.payload.onevision_encoder import EncoderPayload, encoder_payload
from backend.payload.write import MODELS, PayloadFiles, read_output, write_payload

if TYPE_CHECKING:
    from backend.pipeline import RunResult


def prompt_for_result(result: RunResult, *, compact: bool = False) -> str:
    """The LLaVA-OneVision-2 prompt span of a run's canvases, or one line saying why there is none.

    The text ``codec-lens payload OUT --model llava-ov2`` writes to prompt.txt; ``compact`` writes
    each run's ``<|image_pad|>`` tokens as ``<|image_pad|>×N`` (for people).
    """
    from backend.errors import InputError

    count = result.canvases.count
    names = [f"canvas_{i:03d}" for i in range(count)]
    try:
        payload = llava_ov2_payload(
            result.canvases.src_patch_position,
            canvas_names=names,
            grid_hw=result.geometry.grid_hw,
            patch=result.geometry.patch,
            fps=result.info.fps,
        )
    except InputError as exc:
        return f"No LLaVA-OneVision-2 prompt for these canvases: {exc.one_line()}"
    if not compact:
        return payload.prompt
    return "".join(
        f"<{frame / payload.fps:.1f} seconds><|vision_start|><|image_pad|>×{count}<|vision_end|>\n"
        for frame, count in payload.runs
    )


__all__ = [
    "MODELS",
    "EncoderPayload",
    "LlavaPayload",
    "PayloadFiles",
    "block_order",
    "encoder_payload",
    "llava_ov2_payload",
    "prompt_for_result",
    "read_output",
    "timestamp_prompt",
    "write_payload",
]
