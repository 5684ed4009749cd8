"""The one C extension: the log cleaner's map pass loop (broker/records/_keyindex.c).

Everything else about the package is in pyproject.toml. The extension is optional: without a C
compiler and Python's headers the install goes on, and compaction.index_keys reads in Python.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "odradek.broker.records._keyindex",
            sources=["broker/records/_keyindex.c"],
            optional=True,
        )
    ]
)
