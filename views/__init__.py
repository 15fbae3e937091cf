"""Codec Lens viewers: pure prepare_* functions plus Gradio builders."""
