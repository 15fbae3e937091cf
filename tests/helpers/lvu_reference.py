"""Run lmms-video-utils 0.1.0 on a list of jobs and save its outputs (runs in the parity venv, with torch).

Usage: ``python lvu_reference.py JOBS.json``; JOBS.json is a list of
``{"video": path, "kwargs": fetch_codec_video keywords, "out": path.npz}``. Each .npz holds
``positions`` (L, 3) int64, ``canvases`` (C, H, W, 3) uint8, ``gop_ids``, ``source_pts``,
``n_groups`` and ``fps``. Prints one line per job with its wall time.

One change to the reference, and only to its motion vectors: its metadata pass
(``CodecMetadataIndex._scan``) exports them under frame threads, where FFmpeg's export races —
the reference's own vectors vary run to run (a few frames per clip on H.264, a different set each
time), so its mvwarp positions do too. The test pins them: after the reference's own pass (whose
packet sizes and picture types are kept, frame-threaded attribution included), each frame's
vector field is replaced by the one a slice-threaded decode exports (equal to a one-thread
decode's), densified by the reference's own ``_densify_mv``.
"""

import json
import sys
import time
import warnings

import av
import numpy as np
from lmms_video_utils import codec_meta, fetch_codec_video

warnings.simplefilter("ignore")
_reference_scan = codec_meta.CodecMetadataIndex._scan


def _scan_with_race_free_vectors(self: codec_meta.CodecMetadataIndex) -> None:
    """The reference's metadata pass, then its vectors again from a slice-threaded decode."""
    if self._scanned:
        return
    _reference_scan(self)
    count = 0
    with av.open(str(self.path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "SLICE"
        stream.codec_context.options = {"flags2": "+export_mvs"}
        for count, frame in enumerate(container.decode(stream), start=1):
            side = codec_meta._find_mv_side_data(frame)
            field = codec_meta._densify_mv(side, frame.height, frame.width) if side is not None else None
            self._meta[count - 1].mv_field = field
    if count != self._num_frames:
        raise RuntimeError(
            f"{self.path}: the slice-threaded pass gave {count} frames, the reference's {self._num_frames}"
        )


codec_meta.CodecMetadataIndex._scan = _scan_with_race_free_vectors
for job in json.load(open(sys.argv[1])):
    t0 = time.perf_counter()
    out = fetch_codec_video(job["video"], **job["kwargs"])
    np.savez(
        job["out"],
        positions=out.patch_positions.numpy(),
        canvases=out.canvases.permute(0, 2, 3, 1).numpy(),
        gop_ids=out.gop_ids.numpy(),
        source_pts=out.source_pts.numpy(),
        n_groups=np.asarray(out.n_groups),
        fps=np.asarray(out.fps),
    )
    print(f"{job['out']}: {time.perf_counter() - t0:.2f} s", flush=True)
