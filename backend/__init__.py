"""Codec Lens backend: the selection pipeline and analyses as pure functions over records."""
