"""llava-ov2: LLaVA-OneVision-2's codec-stream frontend (lmms-video-utils 0.1.0), parity and clean.

Stage modules: ``sample`` (how many frames, which), ``geometry`` (canvas grid), ``decode`` (one
streaming pass), ``score`` (residuals and packet-size weights; ``SCORE_MODES``,
``BITCOST_WEIGHTS``), ``gop`` (``GOP_MODES``), ``quota`` (temporal-quota selection),
``torch_order`` (torch's tie order), ``quirks`` (the reference's defects), ``options`` and
``run`` (the recipe).
"""
