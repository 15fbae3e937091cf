"""Run lmms-video-utils 0.1.0 on a list of jobs and save its outputs (runs in the parity venv, with torch).

Usage: ``python lvu_reference.py JOBS.json``; JOBS.json is a list of
``{"video": path, "kwargs": fetch_codec_video keywords, "out": path.npz}``. Each .npz holds
``positions`` (L, 3) int64, ``canvases`` (C, H, W, 3) uint8, ``gop_ids``, ``source_pts``,
``n_groups`` and ``fps``. Prints one line per job with its wall time.
"""

import json
import sys
import time
import warnings

import numpy as np
from lmms_video_utils import fetch_codec_video

warnings.simplefilter("ignore")
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
