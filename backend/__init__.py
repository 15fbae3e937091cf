"""Codec Lens backend: the selection pipeline and analyses as pure functions over records."""

# A constant, not importlib.metadata: that import alone costs ~90 ms of every CLI start
# (tests/backend/test_stages.py keeps it equal to pyproject.toml's version).
__version__ = "0.1.0"
