"""The C extension of plancontracts-fast; everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "plancontracts_fast._native",
            sources=["src/plancontracts_fast/_native.c"],
            # Warnings shown, never fatal: a user's compiler may warn where gcc 12 does not.
            extra_compile_args=["-Wall", "-Wextra"],
        )
    ]
)
