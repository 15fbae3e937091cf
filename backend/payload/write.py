"""Model-ready payloads: read a codec-lens / codec-video-prep output folder, write what a model takes."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backend.config import Registry, Variant
from backend.cvp_format.read import CvpOutput, read_cvp_dir
from backend.errors import InputError, OutputError
from backend.payload.llava_ov2 import llava_ov2_payload
from backend.payload.onevision_encoder import encoder_payload

_MANIFEST = "manifest.json"  # written last: its presence means the payload folder is complete


@dataclass(frozen=True)
class PayloadFiles:
    """A payload before it is written: arrays, texts, its manifest and the canvases it copies."""

    model: str
    arrays: dict[str, np.ndarray]
    texts: dict[str, str]
    manifest: dict[str, Any]
    canvases: tuple[Path, ...]


def _canvas_names(output: CvpOutput) -> list[str]:
    return [p.name for p in output.canvas_paths]


def _fps(output: CvpOutput) -> float:
    fps = output.meta.get("fps")
    return float(fps) if isinstance(fps, (int, float)) and fps > 0 else 30.0


def llava_ov2_files(output: CvpOutput) -> PayloadFiles:
    """``positions.npy``, ``prompt.txt`` and the manifest for LLaVA-OneVision-2's processor."""
    names = _canvas_names(output)
    try:
        payload = llava_ov2_payload(
            output.positions, canvas_names=names, grid_hw=output.grid_hw, patch=output.patch, fps=_fps(output)
        )
    except InputError as exc:
        # Name the canvas file inside the folder (or the folder) the problem is in.
        where = output.directory / exc.path if exc.path else output.directory
        raise InputError(exc.message, path=where, stage="payload") from exc
    manifest = payload.manifest(names) | {"source": str(output.directory)}
    return PayloadFiles(
        model="llava-ov2",
        arrays={"positions.npy": payload.positions},
        texts={"prompt.txt": payload.prompt},
        manifest=manifest,
        canvases=tuple(output.canvas_paths[i] for i in payload.kept),
    )


def onevision_encoder_files(output: CvpOutput) -> PayloadFiles:
    """``positions_thw.npy``, ``visible_indices.npy`` and the manifest for OneVision-Encoder."""
    try:
        payload = encoder_payload(output.positions, frame_ids=output.frame_ids, grid_hw=output.grid_hw)
    except InputError as exc:
        raise InputError(exc.message, path=output.directory, stage="payload") from exc
    manifest = payload.manifest(
        _canvas_names(output), fps=_fps(output), frame_ids=output.frame_ids.tolist(), patch=output.patch
    ) | {"source": str(output.directory)}
    return PayloadFiles(
        model="onevision-encoder",
        arrays={"positions_thw.npy": payload.positions_thw, "visible_indices.npy": payload.visible_indices},
        texts={},
        manifest=manifest,
        canvases=output.canvas_paths,
    )


MODELS: Registry[Variant] = Registry(
    "model",
    (
        Variant(
            "llava-ov2", llava_ov2_files, "LLaVA-OneVision-2: positions in 2x2 block order, timestamp prompt"
        ),
        Variant(
            "onevision-encoder", onevision_encoder_files, "OneVision-Encoder: positions_thw, visible_indices"
        ),
    ),
)


def read_output(output_dir: str | Path) -> CvpOutput:
    """The output folder, validated (as ``codec-lens import`` reads it), with ``tokens.npy`` checked
    against ``src_patch_position.npy`` when present."""
    output = read_cvp_dir(output_dir)
    tokens_path = output.directory / "tokens.npy"
    if tokens_path.is_file():
        try:
            tokens = np.load(tokens_path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise InputError(
                f"is truncated or not a .npy array ({exc})", path=tokens_path, stage="payload"
            ) from exc
        if tokens.ndim != 2 or tokens.shape[0] != output.positions.shape[0] or tokens.shape[1] < 3:
            raise InputError(
                f"has shape {tokens.shape}; src_patch_position.npy has {output.positions.shape[0]} rows",
                path=tokens_path,
                stage="payload",
            )
        if not np.array_equal(tokens[:, :3], output.positions):
            row = int(np.flatnonzero((tokens[:, :3] != output.positions).any(axis=1))[0])
            raise InputError(
                f"row {row} {tokens[row, :3].tolist()} differs from src_patch_position.npy's "
                f"{output.positions[row].tolist()}",
                path=tokens_path,
                stage="payload",
            )
    return output


def _check_out(out: Path) -> None:
    """The payload folder may be replaced only if missing, empty or an earlier payload."""
    if out.name in ("", ".", ".."):
        raise OutputError("the payload folder needs a name of its own", path=out, stage="payload")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise OutputError("exists and is not a folder", path=out, stage="payload")
    if out.is_dir() and any(out.iterdir()) and not (out / _MANIFEST).is_file():
        raise OutputError(
            f"exists and is not a payload folder (no {_MANIFEST}); refusing to replace it",
            path=out,
            stage="payload",
        )


def write_payload(output_dir: str | Path, out_dir: str | Path, *, model: str) -> PayloadFiles:
    """Write the payload of ``model`` for the output folder ``output_dir`` into ``out_dir``.

    Files: the model's arrays and texts, the canvases it takes (copied, in order) and
    ``manifest.json`` (last). The folder is built beside ``out_dir`` and renamed into place, so a
    failure leaves no partial payload; only a missing or empty folder, or an earlier payload, is
    replaced.

    Raises
    ------
    ValueError : an unknown model.
    InputError : the output folder is not a readable codec-lens / cvp output, or the model cannot
        take its canvases (a half-padded canvas, patches of another size, …), naming the file.
    OutputError : ``out_dir`` holds something else or cannot be written.
    """
    builder = MODELS.lookup(model)
    files: PayloadFiles = builder.function(read_output(output_dir))
    out = Path(out_dir)
    _check_out(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    except OSError as exc:
        raise OutputError(
            f"cannot create the payload folder ({exc.strerror})", path=out, stage="payload"
        ) from exc
    try:
        for name, array in files.arrays.items():
            np.save(tmp / name, array, allow_pickle=False)
        for name, text in files.texts.items():
            (tmp / name).write_text(text, encoding="utf-8")
        for canvas in files.canvases:
            shutil.copyfile(canvas, tmp / canvas.name)
        (tmp / _MANIFEST).write_text(
            json.dumps(files.manifest, indent=2, ensure_ascii=False), encoding="utf-8"
        )
        os.chmod(tmp, 0o755)
        _check_out(out)
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise OutputError(
                f"cannot write the payload ({exc.strerror or exc})", path=out, stage="payload"
            ) from exc
        raise
    return files
