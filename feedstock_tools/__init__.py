"""Maintainer tools of the pytorch feedstock: recipe rendering checks, CI-file generation, rehearsal."""
