"""The optional C part of diag (diag/_lines.c, the fast reader's line classifier): everything else is in
pyproject.toml. Where no C compiler is, the build goes on without it and diag does the same work with
polars (diag/scan.py)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("diag._lines", ["diag/_lines.c"], optional=True, extra_compile_args=["-O2"])])
