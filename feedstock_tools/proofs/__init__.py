"""Proofs against real artefacts: the megabuild rehearsal, the staging of real wheels, the GPU check.
Imports ``common``, ``conda`` and ``ci``; nothing imports it but the CLI.
"""
