"""Helpers the tests import: clip encoders, paths, CLI runners, a synthetic run (fixtures: conftest.py).

pytest puts ``tests/`` on ``sys.path`` (conftest.py there has no package above it), so tests
import these as ``from helpers.clips import encode_clip``.
"""
