"""Wall time and peak memory of the llava-ov2 selector against lmms-video-utils 0.1.0, side by side.

Usage::

    python bench/llava_vs_lmms.py [VIDEO] [--reference-python PY] [--rounds N] [--option name=value ...]
                                  [--floor]

Each run is its own child process (its peak RSS from ``wait4``), ours and the reference's
alternating so that both see the same machine load; the medians and their ratios are printed
(targets: time ≤ 0.2×, memory ≤ 0.25×), and the two runs' patch positions are compared.
``--floor`` adds a third child in each round: the decode pass alone (the frames our run must
decode, the sampled ones converted to RGB, nothing resized or scored), the least any exact
reproduction on PyAV's decoder and conversion costs, as a ratio to the reference too.

VIDEO defaults to a 24-second 1280×720 H.264 clip (B-frames) made once from the real clip
``tests/data/real_h264_flower_timelapse.mp4`` (150 frames played forward and back, 720 frames,
libx264 veryfast CRF 23 bf 3) under ``~/.cache/codec-lens-bench/`` — not in the repository.
PY defaults to the venv the parity test keeps (``~/.cache/codec-lens-tests/lvu-0.1.0-venv``):
torch and ``lmms-video-utils==0.1.0``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "codec-lens-bench"
REFERENCE_PYTHON = Path.home() / ".cache" / "codec-lens-tests" / "lvu-0.1.0-venv" / "bin" / "python"
SOURCE = ROOT / "tests" / "data" / "real_h264_flower_timelapse.mp4"

_OURS = """
import json, sys, numpy as np
from backend.selectors.llava_ov2.options import LlavaOv2Options
from backend.selectors.llava_ov2.run import select_llava_ov2
result = select_llava_ov2(sys.argv[1], options=LlavaOv2Options(**json.loads(sys.argv[2])))
np.save(sys.argv[3], result.canvases.src_patch_position)
"""
_FLOOR = """
import json, sys
from backend.selectors.llava_ov2.decode import separate_size_pass, stream_flags
from backend.selectors.llava_ov2.options import LlavaOv2Options
from backend.selectors.llava_ov2.sample import sample, stream_fps
from backend.stages.probe import ProbeConfig, probe
from native import stream_decode
options = LlavaOv2Options(**json.loads(sys.argv[2]))
cfg = options.stage_configs()
info = probe(sys.argv[1], config=ProbeConfig(profile="clean"))
facts = stream_decode.stream_facts(info.path)
fps = stream_fps(facts.average_rate and float(facts.average_rate), facts.base_rate and float(facts.base_rate))
wanted = frozenset(int(i) for i in sample(info, fps, config=cfg["sample"]).frame_indices)
for _ in stream_decode.iter_stream(info.path, wanted, **stream_flags(cfg["decode"])):
    pass
if separate_size_pass(cfg["decode"]):
    stream_decode.attributed_sizes(info.path, max(wanted), thread_count=cfg["decode"].threads)
"""
_REFERENCE = """
import json, sys, warnings, numpy as np
warnings.simplefilter("ignore")
from lmms_video_utils import fetch_codec_video
out = fetch_codec_video(sys.argv[1], **json.loads(sys.argv[2]))
np.save(sys.argv[3], out.patch_positions.numpy())
"""


def make_clip(path: Path) -> Path:
    """The 24-second 720p H.264 clip (see the module docstring), made once."""
    if path.is_file():
        return path
    from fractions import Fraction

    import av

    from native import encode_frame

    frames = []
    with av.open(str(SOURCE)) as src:
        for frame in src.decode(video=0):
            frames.append(frame.reformat(width=1280, height=720, format="yuv420p").to_ndarray())
    sequence: list = []
    while len(sequence) < 720:
        sequence += frames + frames[::-1]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial.mp4")
    with av.open(str(tmp), "w") as out:
        stream = out.add_stream("libx264", rate=30, options={"crf": "23", "preset": "veryfast", "bf": "3"})
        stream.width, stream.height, stream.pix_fmt = 1280, 720, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 30)
        for i, plane in enumerate(sequence[:720]):
            frame = av.VideoFrame.from_ndarray(plane, format="yuv420p")
            frame.pts = i
            encode_frame(out, stream, frame)
        encode_frame(out, stream, None)
    tmp.rename(path)
    return path


def run_child(argv: list[str], cwd: Path) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MiB, CPU seconds of all its threads) of one child process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {err[-1500:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("video", nargs="?", type=Path, help="default: the 24 s 720p clip (made once)")
    parser.add_argument(
        "--reference-python", type=Path, default=REFERENCE_PYTHON, help="Python with torch + lmms-video-utils"
    )
    parser.add_argument("--rounds", type=int, default=2, help="runs of each (default 2)")
    parser.add_argument("--profile", default="parity", choices=("parity", "clean"))
    parser.add_argument("--option", action="append", default=[], help="llava-ov2 option name=value")
    parser.add_argument(
        "--floor", action="store_true", help="also time the decode pass alone (see the module docstring)"
    )
    args = parser.parse_args()
    if not args.reference_python.is_file():
        raise SystemExit(
            f"no reference Python at {args.reference_python}: run the parity test once "
            "(tests/backend/selectors/test_llava_ov2_parity.py) or pass --reference-python"
        )
    sys.path.insert(0, str(ROOT))
    from backend.selectors.llava_ov2.options import LlavaOv2Options

    video = args.video or make_clip(CACHE / "flower_720p_24s.mp4")
    given = {}
    for item in args.option:
        name, _, value = item.partition("=")
        default = getattr(LlavaOv2Options(), name)
        given[name] = type(default)(value)
    options = LlavaOv2Options(profile=args.profile, **given)
    ours_opts, ref_opts = json.dumps(options.as_dict()), json.dumps(options.codec_config())
    names = ["ours", "lmms-video-utils"] + (["decode floor"] if args.floor else [])
    times: dict[str, list[float]] = {name: [] for name in names}
    rss: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        out = {"ours": Path(tmp) / "ours.npy", "lmms-video-utils": Path(tmp) / "ref.npy"}
        commands = {
            "ours": [sys.executable, "-c", _OURS, str(video), ours_opts, str(out["ours"])],
            "lmms-video-utils": [
                str(args.reference_python), "-c", _REFERENCE, str(video), ref_opts,
                str(out["lmms-video-utils"]),
            ],
            "decode floor": [sys.executable, "-c", _FLOOR, str(video), ours_opts],
        }  # fmt: skip
        for k in range(args.rounds):
            order = names if k % 2 == 0 else names[::-1]
            for name in order:
                wall, peak, used = run_child(commands[name], ROOT)
                times[name].append(wall)
                rss[name].append(peak)
                cpu[name].append(used)
                line = f"round {k + 1}: {name:17s} {wall:7.2f} s wall  {used:7.2f} s CPU  {peak:8.1f} MiB"
                print(line, flush=True)
        import numpy as np

        same = np.array_equal(np.load(out["ours"]), np.load(out["lmms-video-utils"]))
    t_ours, t_ref = statistics.median(times["ours"]), statistics.median(times["lmms-video-utils"])
    m_ours, m_ref = statistics.median(rss["ours"]), statistics.median(rss["lmms-video-utils"])
    print(f"video {video} · profile {args.profile} · options {given or 'defaults'} · {os.cpu_count()} CPUs")
    print(
        f"median wall: ours {t_ours:.2f} s, lmms-video-utils {t_ref:.2f} s → ratio {t_ours / t_ref:.3f} "
        "(target ≤ 0.2)"
    )
    print(
        f"median peak RSS: ours {m_ours:.0f} MiB, lmms-video-utils {m_ref:.0f} MiB → ratio "
        f"{m_ours / m_ref:.3f} (target ≤ 0.25)"
    )
    c_ours, c_ref = statistics.median(cpu["ours"]), statistics.median(cpu["lmms-video-utils"])
    print(
        f"median CPU (all threads; less sensitive to other load than wall): ours {c_ours:.2f} s, "
        f"lmms-video-utils {c_ref:.2f} s → ratio {c_ours / c_ref:.3f}"
    )
    if args.floor:
        t_floor, c_floor = statistics.median(times["decode floor"]), statistics.median(cpu["decode floor"])
        print(
            f"decode pass alone (the least an exact run on PyAV's decoder costs): {t_floor:.2f} s wall → "
            f"ratio {t_floor / t_ref:.3f}; {c_floor:.2f} s CPU → ratio {c_floor / c_ref:.3f}"
        )
    # The reference here is unpatched: its mvwarp vectors race under frame threads (docs/selectors.md),
    # so in those modes a difference may be the reference's race, not ours (the parity test pins it).
    print(f"patch positions identical: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
