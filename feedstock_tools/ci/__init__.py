"""The conda-smithy emulation and the CI files: ``.ci_support/`` from the recipe and the pinning, the
workflow matrix, ``templates/``, and the stdlib readers the CI scripts use. Imports ``common`` and ``conda``.
"""
