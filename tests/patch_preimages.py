"""Pre-images of the platform patches 0010-0012: the lines of PyTorch 2.13.0 they touch, as verbatim evidence.

Source: conda-forge/pytorch-cpu-feedstock at 74dd3d46 (its 2.13.0 recipe, same tarball and sha256 as ours).
Its patches apply strictly to the 2.13.0 tarball, so their context and '-' lines are 2.13.0 text, at the line
numbers of their hunk headers:

* recipe/patches/0019-Add-missing-includes-in-c10d-control_plane-Handlers..patch (Handlers.hpp, from line 3)
* recipe/patches/0021-Set-CPU-flags-via-add_definitions.patch (cmake/Codegen.cmake, lines 386, 400, 436)
* recipe/patches/0022-Set-Python_SOABI-when-cross-compiling-so-extension-m.patch (cmake/Dependencies.cmake,
  line 878)

:func:`write_preimage` lays each excerpt at its line number and fills the lines the evidence does not show
with placeholders, so ``git apply --check`` tests a patch's context and line numbers against 2.13.0's.
"""

# ruff: noqa: E501 (verbatim upstream lines)
from __future__ import annotations

from pathlib import Path

PREIMAGES: dict[str, dict[int, str]] = {
    "torch/csrc/distributed/c10d/control_plane/Handlers.hpp": {
        3: """\
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

""",
    },
    "cmake/Codegen.cmake": {
        386: """\
  list(APPEND CPU_CAPABILITY_FLAGS "${OPT_FLAG}")

  if(CXX_AVX512_FOUND)
    set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -DHAVE_AVX512_CPU_DEFINITION")
    # HIP code also needs CPU feature defines for DispatchStub ABI compatibility
    if(USE_ROCM)
      string(APPEND CMAKE_HIP_FLAGS " -DHAVE_AVX512_CPU_DEFINITION")
""",
        400: """\
  endif(CXX_AVX512_FOUND)

  if(CXX_AVX2_FOUND)
    set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -DHAVE_AVX2_CPU_DEFINITION")
    if(USE_ROCM)
      string(APPEND CMAKE_HIP_FLAGS " -DHAVE_AVX2_CPU_DEFINITION")
    endif()
""",
        436: """\
  endif(CXX_AVX2_FOUND)

  if(CXX_VSX_FOUND)
    SET(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -DHAVE_VSX_CPU_DEFINITION")
    LIST(APPEND CPU_CAPABILITY_NAMES "VSX")
    LIST(APPEND CPU_CAPABILITY_FLAGS "${OPT_FLAG}  ${CXX_VSX_FLAGS}")
  endif(CXX_VSX_FOUND)

  if(CXX_ZVECTOR_FOUND)
    SET(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -DHAVE_ZVECTOR_CPU_DEFINITION")
    LIST(APPEND CPU_CAPABILITY_NAMES "ZVECTOR")
    LIST(APPEND CPU_CAPABILITY_FLAGS "${OPT_FLAG}  ${CXX_ZVECTOR_FLAGS}")
  endif(CXX_ZVECTOR_FOUND)

  if(CXX_SVE256_FOUND)
    set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -DHAVE_SVE_CPU_DEFINITION")
    list(APPEND CPU_CAPABILITY_NAMES "SVE256")
    list(APPEND CPU_CAPABILITY_FLAGS "${OPT_FLAG} -march=armv8-a+sve+bf16 -D__ARM_FEATURE_BF16 -msve-vector-bits=256")
    list(APPEND CPU_CAPABILITY_NAMES "SVE128")
""",
    },
    "cmake/Dependencies.cmake": {
        878: """\
    endif()
    # Observers are required in the python build
    caffe2_update_option(USE_OBSERVERS ON)
  else()
    message(WARNING "Python dependencies not met. Not compiling with python. Suppress this warning with -DBUILD_PYTHON=OFF")
    caffe2_update_option(BUILD_PYTHON OFF)
""",
    },
}


def write_preimage(root: Path, path: str) -> Path:
    """``root/path`` with the evidence at its line numbers and placeholders in between (and 3 after)."""
    lines: list[str] = []
    for start, text in sorted(PREIMAGES[path].items()):
        while len(lines) < start - 1:
            lines.append(f"# line {len(lines) + 1}: not in the evidence\n")
        lines.extend(text.splitlines(keepends=True))
    lines.extend(f"# line {len(lines) + n}: not in the evidence\n" for n in (1, 2, 3))
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(lines))
    return target
