"""Stand-in (test double) of the top-level package functorch: present so that the package test's
import list finds it, as in the 2.13.0 wheel (functorch/__init__.py, which imports torch first)."""

import torch  # noqa: F401
