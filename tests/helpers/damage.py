"""Seeded damaged copies of test clips: bit flips, zeroed runs, cuts, spliced-out chunks, header damage."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import av

from helpers.clips import Codec, encode_clip

DAMAGE_KINDS: tuple[str, ...] = ("flip", "zero", "cut", "splice", "header")
"""Every kind of damage :func:`damage_bytes` knows, in a fixed order.

* ``flip``: 8–48 single bits flipped at random payload bytes;
* ``zero``: 1–3 runs of 64–2048 payload bytes set to 0;
* ``cut``: the file cut at a random point between 15 % and 90 % of its size;
* ``splice``: 1–3 chunks of 128–4096 payload bytes removed (what follows moves up, so the
  container's offsets point at the wrong bytes);
* ``header``: 4–24 bytes of the container's own structures (everything that is not packet
  payload: MP4 ``ftyp``/``moov``, Matroska EBML/segment/track headers and cues, MPEG-TS
  PAT/PMT) replaced by random values.
"""

# (suffix, container format for PyAV, encode_clip codec) of each clip a damage test starts from.
CONTAINERS: dict[str, tuple[str, str, Codec]] = {
    "h264_mp4": (".mp4", "mp4", "h264"),
    "hevc_ts": (".ts", "mpegts", "hevc"),
    "vp9_webm": (".webm", "webm", "vp9"),
    "h264_mkv": (".mkv", "matroska", "h264"),
    "av1_mp4": (".mp4", "mp4", "av1"),
    "av1_mkv": (".mkv", "matroska", "av1"),
}


@dataclass(frozen=True)
class Layout:
    """Where a file's packet payloads lie; everything else is container structure."""

    size_bytes: int
    payload: tuple[tuple[int, int], ...]
    """(start, end) byte ranges of the video packets, sorted and merged."""

    @property
    def structure(self) -> tuple[tuple[int, int], ...]:
        """The ranges between and around the payload (headers, index, per-packet framing)."""
        gaps, pos = [], 0
        for start, end in self.payload:
            if start > pos:
                gaps.append((pos, start))
            pos = max(pos, end)
        if pos < self.size_bytes:
            gaps.append((pos, self.size_bytes))
        return tuple(gaps)


def file_layout(path: Path | str) -> Layout:
    """Packet byte ranges of the first video stream, as the demuxer reports them."""
    path = Path(path)
    ranges: list[tuple[int, int]] = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for packet in container.demux(stream):
            if packet.size and packet.pos is not None and packet.pos >= 0:
                ranges.append((int(packet.pos), int(packet.pos) + int(packet.size)))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return Layout(size_bytes=path.stat().st_size, payload=tuple(merged))


def _pick(rng: random.Random, ranges: tuple[tuple[int, int], ...], span: int = 1) -> int:
    """A random offset at which ``span`` bytes fit inside one range (weighted by range length)."""
    usable = [(s, e) for s, e in ranges if e - s >= span]
    if not usable:  # nothing that long: anywhere in the longest range
        s, e = max(ranges, key=lambda r: r[1] - r[0])
        return rng.randrange(s, max(s + 1, e - span + 1))
    total = sum(e - s - span + 1 for s, e in usable)
    k = rng.randrange(total)
    for s, e in usable:
        room = e - s - span + 1
        if k < room:
            return s + k
        k -= room
    raise AssertionError("unreachable")


def damage_bytes(data: bytes, kind: str, rng: random.Random, layout: Layout) -> bytes:
    """One damaged copy of ``data`` (a file whose layout is ``layout``); see :data:`DAMAGE_KINDS`."""
    buf = bytearray(data)
    payload = layout.payload or ((0, len(buf)),)
    if kind == "flip":
        for _ in range(rng.randint(8, 48)):
            pos = _pick(rng, payload)
            buf[pos] ^= 1 << rng.randrange(8)
    elif kind == "zero":
        for _ in range(rng.randint(1, 3)):
            length = rng.randint(64, 2048)
            pos = _pick(rng, payload, length)
            buf[pos : pos + length] = bytes(len(buf[pos : pos + length]))
    elif kind == "cut":
        buf = buf[: rng.randint(len(buf) * 15 // 100, len(buf) * 90 // 100)]
    elif kind == "splice":
        # Cut from the back so that earlier offsets of the layout stay valid.
        cuts = []
        for _ in range(rng.randint(1, 3)):
            length = rng.randint(128, 4096)
            cuts.append((_pick(rng, payload, length), length))
        for pos, length in sorted(cuts, reverse=True):
            del buf[pos : pos + length]
    elif kind == "header":
        structure = layout.structure or ((0, min(len(buf), 512)),)
        for _ in range(rng.randint(4, 24)):
            buf[_pick(rng, structure)] = rng.randrange(256)
    else:
        raise ValueError(f"unknown damage {kind!r}; expected one of {DAMAGE_KINDS}")
    return bytes(buf)


def write_damaged(
    clip: Path | str, out_dir: Path | str, seed: int, kinds: tuple[str, ...] = DAMAGE_KINDS
) -> dict[str, Path]:
    """Write one damaged copy of ``clip`` per kind into ``out_dir``; the same seed gives the same bytes.

    Returns kind → path, named ``<clip stem>.<kind><seed><suffix>`` (the clip's suffix, so the
    container is guessed as for the intact file).
    """
    clip, out_dir = Path(clip), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = clip.read_bytes()
    layout = file_layout(clip)
    written = {}
    for kind in kinds:
        # A string seed is hashed with SHA-512 by random.seed: stable across runs and platforms.
        rng = random.Random(f"{seed}:{kind}:{clip.name}")
        path = out_dir / f"{clip.stem}.{kind}{seed}{clip.suffix}"
        path.write_bytes(damage_bytes(data, kind, rng, layout))
        written[kind] = path
    return written


def remux(
    source: Path | str, target: Path | str, *, container_format: str, start_offset_secs: float = 0.0
) -> Path:
    """Copy the video packets of ``source`` into another container (no re-encoding), their
    timestamps moved ``start_offset_secs`` later (a stream whose clock does not start at 0)."""
    target = Path(target)
    # bitexact: no random Matroska segment UIDs, so the copy is byte-reproducible.
    with (
        av.open(str(source)) as src,
        av.open(str(target), "w", format=container_format, container_options={"fflags": "+bitexact"}) as dst,
    ):
        in_stream = src.streams.video[0]
        out_stream = dst.add_stream_from_template(in_stream, opaque=True)
        shift = round(start_offset_secs / in_stream.time_base)
        for packet in src.demux(in_stream):
            if packet.dts is None:  # the demuxer's flush packet
                continue
            packet.dts += shift
            if packet.pts is not None:
                packet.pts += shift
            packet.stream = out_stream
            dst.mux(packet)
    return target


def make_clip(name: str, folder: Path | str, **shape: int) -> Path:
    """The intact clip ``name`` (a :data:`CONTAINERS` key) in ``folder``, encoded small."""
    suffix, container_format, codec = CONTAINERS[name]
    folder = Path(folder)
    params = {"width": 320, "height": 240, "frames": 20, "gop": 10} | shape
    encoded = encode_clip(folder / f"{name}.encoded", codec=codec, **params)
    if encoded.suffix == suffix:
        return encoded.rename(folder / f"{name}{suffix}")
    target = remux(encoded, folder / f"{name}{suffix}", container_format=container_format)
    encoded.unlink()
    return target
