"""The onevision selector: OneVision-Encoder's LLaVA-NeXT codec path (global top-K of fused motion energy).

What the reference does (``EvolvingLMMs-Lab/OneVision-Encoder``,
``llava_next/Compressed_Video_Reader/tool/offline_precompute_llava_codec_assets.py`` with
``stage1.py`` / ``stage2.py``; the static fallback from ``dataloader/ap_dataloader_dali_codec.py``):
sample ``seq_len_frames`` frames uniformly, fuse motion-vector and residual energy per pixel,
letterbox every frame into a ``square_size`` square, score ``patch_size`` patches, keep frame 0
whole (canvas 0) and fill the remaining ``num_images - 1`` canvases with the top-K patches of
the other frames, either globally or per time bucket; a nearly static video first takes a few
uniformly spaced frames. Positions are ``[t, h, w]`` over the sampled frames.

Here that is a recipe of the pipeline's own stages (probe, uniform sampling, a motion signal of
``backend.stages.signals`` standing in for the patched decoder's residual export, the quality
test, the block-raster packer with 1×1 blocks) around the three steps that are onevision's:
the letterbox geometry, the letterboxed patch scores and the top-K selection. It returns the
same records as cvp's pipeline, so the output folder, the store and every view take it.
``docs/selectors.md`` (section onevision) lists every deviation from the reference.
"""

from __future__ import annotations

from backend.selectors.onevision.letterbox import (
    LetterboxConfig,
    decode_letterboxed,
    letterbox_geometry,
    letterbox_offsets,
    letterboxed_raw_grids,
    picture_blocks,
    score_letterboxed,
    valid_patches,
)
from backend.selectors.onevision.options import SIGNAL_CHOICES, OnevisionOptions
from backend.selectors.onevision.run import ONEVISION, select_onevision
from backend.selectors.onevision.topk import (
    TOPK,
    TOPK_MODES,
    StaticCheck,
    TopKConfig,
    select_topk,
    static_check,
    topk_global,
    topk_time_bucket,
    uniform_patch_picks,
)

__all__ = [
    "ONEVISION",
    "SIGNAL_CHOICES",
    "TOPK",
    "TOPK_MODES",
    "LetterboxConfig",
    "OnevisionOptions",
    "StaticCheck",
    "TopKConfig",
    "decode_letterboxed",
    "letterbox_geometry",
    "letterbox_offsets",
    "letterboxed_raw_grids",
    "picture_blocks",
    "score_letterboxed",
    "select_onevision",
    "select_topk",
    "static_check",
    "topk_global",
    "topk_time_bucket",
    "uniform_patch_picks",
    "valid_patches",
]
