"""Build hook for the one compiled kernel (the luma-bias analyzer's); metadata is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "native._luma_kernel",
            ["native/_luma_kernel.c"],
            extra_compile_args=["-O3"],
            # Without a C compiler the package still installs; the analyzer then measures with numpy.
            optional=True,
        )
    ]
)
