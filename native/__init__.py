"""Boundary to compiled decoders (cvp's patched FFmpeg reader and PyAV)."""
