"""Cross-compilation: protobuf's code generator must be the build machine's ``protoc``.

When the target is another platform (linux-aarch64 built on linux-64, osx-64 on osx-arm64), the host
prefix's ``protoc`` is a target binary the build machine cannot run, yet libprotobuf's CMake package
points its imported ``protobuf::protoc`` target there. conda-forge's 2.13.0 recipe rewrites that location
to ``$BUILD_PREFIX/bin/protoc`` (libprotobuf is in the build requirements for this) before building
(pytorch-cpu-feedstock 74dd3d46, recipe/build.sh: ``sed ... IMPORTED_LOCATION_RELEASE .*/bin/protoc``).
Every output gets a fresh host prefix, so every pass that may run CMake does it again; the file belongs to
libprotobuf, so the change is never packaged.
"""

from __future__ import annotations

import re
from pathlib import Path

from megabuild.atomic_file import write_text
from megabuild.conda_env import CondaBuild
from megabuild.environment import is_cross

PROTOBUF_TARGETS = Path("lib") / "cmake" / "protobuf" / "protobuf-targets-release.cmake"
_LOCATION = re.compile(r'IMPORTED_LOCATION_RELEASE\s+"[^"\n]*?/bin/protoc')


def use_build_machine_protoc(build: CondaBuild) -> Path | None:
    """Point ``protobuf::protoc`` at ``$BUILD_PREFIX/bin/protoc``; the file changed, or None if none was."""
    targets = build.prefix / PROTOBUF_TARGETS
    if not is_cross(build) or not targets.is_file():
        return None
    text = targets.read_text()
    replacement = f'IMPORTED_LOCATION_RELEASE "{build.build_prefix}/bin/protoc'
    changed = _LOCATION.sub(lambda _: replacement, text)
    if changed == text:
        return None
    return write_text(targets, changed, mode=targets.stat().st_mode & 0o7777)
