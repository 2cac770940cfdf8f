"""Dynamic ``version`` of the 2.15-shaped stand-in (a TEST DOUBLE): scikit-build-core asks this hook.

The value is computed as the 2.13-shaped stand-in computes it (``tools/generate_torch_version.py``, shared:
``version.txt``, replaced by ``PYTORCH_BUILD_VERSION`` plus ``.postN`` for a ``PYTORCH_BUILD_NUMBER`` above
1), so the wheel's METADATA and ``torch/version.py`` (written by CMake's ``gen_torch_version`` target) agree.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def dynamic_metadata(field: str, settings: dict[str, object] | None = None) -> str:
    if field != "version":
        raise ValueError(f"the stand-in's metadata hook provides the version only, not {field!r}")
    sys.path.insert(0, str(ROOT))
    try:
        from tools.generate_torch_version import get_torch_version
    finally:
        sys.path.remove(str(ROOT))
    return get_torch_version()
