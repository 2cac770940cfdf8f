"""Maintainer conveniences: the dependency table, the build graph, the cache diff and the recipe
consistency check. Imports ``common``, ``conda`` and ``ci``.
"""
