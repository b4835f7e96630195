"""Facts about the installed stack that can silently go wrong (pyspark-client overwriting pyspark's files)."""

from __future__ import annotations

import importlib.metadata


def test_pyspark_files_match_the_installed_wheel():
    """pyspark-client (pulled by the Spark provider) can overwrite pyspark's Python files."""
    import pyspark

    assert pyspark.__version__ == importlib.metadata.version("pyspark")
