"""The C extension (the rest of the package is described in pyproject.toml).

``optional=True``: where no C compiler is at hand the install still succeeds, and
:mod:`ssegate.native.fanout` uses its pure-Python loop.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ssegate.native._fanout",
            ["src/ssegate/native/_fanout.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
