"""Proofs against real artefacts, one sub-package per job: ``solve`` (the real solver installs the recipe's
packages on each machine), ``wheels`` (the split layout and linkage of real PyTorch wheels), ``rehearsal``
(the megabuild rehearsed against the upstream stand-in), ``builders`` (the real rattler-build and
conda-build build the recipes from a local channel), and ``gpu_check``. Inside, ``solve`` and ``wheels``
come first, ``rehearsal`` uses them, ``builders`` and ``gpu_check`` come last. Imports ``common``, ``conda``
and ``ci``; nothing imports it but the CLI.
"""
