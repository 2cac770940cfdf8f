"""PyYAML's loaders with libyaml's scanner and parser where PyYAML has them (its PyPI wheels do).

The C loaders build the same Python objects as the pure-Python ones (the constructor and resolver classes
are the same), in a fraction of the time (docs/records/2026-11-28-ci-time.md). Every YAML file a tool
reads goes through these.
"""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# every scalar stays a string (conda-build reads variant files so: conda_build/variants.py)
BASE_LOADER: type = getattr(yaml, "CBaseLoader", yaml.BaseLoader)


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` with libyaml's parser."""
    return yaml.load(text, Loader=SAFE_LOADER)


def base_load(text: str) -> Any:
    """``yaml.load(text, Loader=yaml.BaseLoader)`` with libyaml's parser: every scalar a string."""
    return yaml.load(text, Loader=BASE_LOADER)
