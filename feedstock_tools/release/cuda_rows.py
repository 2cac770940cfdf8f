"""PyPI's CUDA builds of the release against the configurations here, and the oldest CUDA the release's
CMake accepts against the oldest one built."""

from __future__ import annotations

import re

from feedstock_tools.common.configuration import cuda_versions
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.maintainer.version_compare import version_numbers
from feedstock_tools.release.release_metadata import Release, cuda_of, requirements
from feedstock_tools.release.rows import PERSON, SAME, Row

# The oldest CUDA the release's CMake accepts (Caffe2's public/cuda.cmake: "if(CUDA_VERSION VERSION_LESS X)")
CUDA_CMAKE = "torch/share/cmake/Caffe2/public/cuda.cmake"
CUDA_FLOOR = re.compile(r"if\(CUDA_VERSION VERSION_LESS ([\d.]+)\)")


def cuda_rows(feedstock: Feedstock, release: Release) -> list[Row]:
    rows = []
    built: dict[str, list[str]] = {}
    for config in feedstock.configurations():
        built.setdefault(config.target_platform, []).extend(cuda_versions(config))
    upstream = requirements(release)
    for subdir, source in release.wheels.items():
        cuda = cuda_of(source)
        ours = sorted(set(built.get(subdir, [])), key=version_numbers)
        if cuda is None:
            rows.append(Row("CUDA", subdir, ", ".join(ours) or "CPU only", "PyPI wheel: CPU", SAME))
            continue
        action = (
            ""
            if cuda in ours
            else (
                f"nothing to change: PyPI's default CUDA {cuda} is not a configuration here, and "
                "conda-forge's pinning and migrations decide which CUDA versions are built (upstream's "
                "other CUDA builds are not on PyPI)"
            )
        )
        rows.append(Row("CUDA", f"{subdir}: PyPI's build", ", ".join(ours), cuda, SAME, action))
    toolkit = upstream.get("cuda-toolkit")
    if toolkit:
        libraries = ", ".join(
            f"{name} {spec}" for name, (spec, _) in upstream.items() if name.startswith("nvidia-")
        )
        rows.append(
            Row(
                "CUDA",
                "PyPI's CUDA stack",
                "",
                f"cuda-toolkit {toolkit[0]}; {libraries}",
                SAME,
                "conda-forge's packages come through the -dev host packages' run_exports",
            )
        )
    floor = release.text(CUDA_CMAKE)
    if floor and (match := CUDA_FLOOR.search(floor[1])):
        oldest = min((v for versions in built.values() for v in versions), key=version_numbers, default=None)
        ok = oldest is None or version_numbers(oldest) >= version_numbers(match[1])
        rows.append(
            Row(
                "CUDA",
                "oldest CUDA the release's CMake accepts",
                oldest or "",
                match[1],
                SAME if ok else PERSON,
                "" if ok else f"drop CUDA {oldest} (recipe/conda_build_config.yaml, migrations)",
            )
        )
    return rows
