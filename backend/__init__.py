"""Codec Lens backend: the selection pipeline and analyses as pure functions over records."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("codec-lens")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.1.0+source"
