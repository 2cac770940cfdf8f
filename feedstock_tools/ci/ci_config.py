"""One CI job as the CI generator and the workflow matrix both see it (plain data)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CiConfig:
    """One ``.ci_support/<name>.yaml``: one CI job."""

    name: str
    short_name: str
    platform_arch: str  # the target, e.g. "osx_arm64"
    build_platform: str  # the machine that builds it, e.g. "osx-64"
    data: dict[str, Any]
    text: str

    @property
    def subdir(self) -> str:
        return self.platform_arch.replace("_", "-")
