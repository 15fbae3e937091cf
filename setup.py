"""Build hook for the compiled kernels in native/; all metadata is in pyproject.toml."""

from setuptools import Extension, setup

# Optional: without a C compiler the package still installs, and the callers fall back to
# numpy/OpenCV (same results, slower); tests fail where a compiler exists but no kernel was built.
setup(
    ext_modules=[
        Extension(
            "native._kernels",
            ["native/_kernels.c"],
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        )
    ]
)
