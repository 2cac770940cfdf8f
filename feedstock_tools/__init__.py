"""Maintainer tools of the pytorch feedstock, one sub-package per job (docs/reference/architecture.md).

``common`` <- ``conda`` <- ``ci`` <- {``maintainer``, ``proofs``}: a sub-package imports only those to its
left; ``__main__`` (the CLI) parses the command line and dispatches to the tool modules.
"""
