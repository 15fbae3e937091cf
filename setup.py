"""Build hook for the compiled kernels in native/; all metadata is in pyproject.toml."""

from setuptools import Extension, setup

# Optional: without a C compiler the package still installs, and the callers fall back to
# numpy/OpenCV (same results, slower); tests fail where a compiler exists but no kernel was built.
setup(
    ext_modules=[
        # The motion kernels match numpy's float arithmetic bit for bit: no fused multiply-adds.
        Extension(
            "native._kernels",
            ["native/_kernels.c"],
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        ),
        # PyTorch's resampling arithmetic bit for bit: every fused multiply-add is an explicit fmaf,
        # so the compiler must add none of its own.
        Extension(
            "native._torch_math",
            ["native/_torch_math.c"],
            extra_compile_args=["-O3", "-ffp-contract=off"],
            libraries=["m"],
            optional=True,
        ),
    ]
)
