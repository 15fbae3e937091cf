"""Codec Lens application layer: CLI entry points and the Gradio app."""
