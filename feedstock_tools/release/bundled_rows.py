"""Versions the release bundles against the conda-forge pins the recipe builds and ships with."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.release.release_metadata import Release
from feedstock_tools.release.rows import PERSON, SAME, Row


@dataclass(frozen=True)
class BundledPin:
    key: str  # the pinning's key
    header: str  # the wheel member that states the bundled version
    pattern: str  # how the header spells it
    spelling: Callable[[str], str]  # the header's value as the pin spells it
    differs: str  # what a difference means for this recipe and what to do ({bundled}, {pins} filled in)


BUNDLED_PINS = (
    BundledPin(
        "fmt",
        "torch/include/fmt/base.h",
        r"#define FMT_VERSION (\d+)",
        lambda v: f"{int(v) // 10000}.{int(v) // 100 % 100}",
        # recipe/meta.yaml's fmt note: the release compiles its bundled fmt into libtorch, header-only,
        # while libtorch ships conda-forge's fmt headers (package_files.py leaves the bundled fmt/** out),
        # so an extension that includes torch's headers compiles against the pinned fmt
        "the release compiles its bundled fmt {bundled} into libtorch while the package ships conda-forge's "
        "fmt {pins} headers (recipe/megabuild/package_files.py leaves torch/include/fmt out), which "
        "extensions compile against. Either pin fmt {bundled} for this feedstock (fmt:\\n  - '{bundled}' "
        "in recipe/conda_build_config.yaml, then render-ci) once conda-forge publishes it, or keep "
        "conda-forge's {pins} and write the release and the reason into the fmt note above "
        "cpp_host_pinned in recipe/meta.yaml (docs/guides/bump-a-release.md, 'Bundled versions')",
    ),
    BundledPin(
        "pybind11_abi",
        "torch/include/pybind11/detail/internals.h",
        r"#\s*define PYBIND11_INTERNALS_VERSION (\d+)",
        str,
        # megabuild/environment.py builds with USE_SYSTEM_PYBIND11=ON: the bundled copy is not compiled
        "torch._C is built against conda-forge's pybind11 (USE_SYSTEM_PYBIND11=ON in "
        "recipe/megabuild/environment.py), whose ABI {pins} the run requirement pybind11-abi names; the "
        "release bundles ABI {bundled}. Keep {pins} unless the release needs the newer pybind11 (the first "
        "real build of torch._C says so): then follow conda-forge's pybind11 migration in "
        ".ci_support/migrations. Write the release and the decision into the pybind11 note in "
        "recipe/meta.yaml (docs/guides/bump-a-release.md, 'Bundled versions')",
    ),
)


def bundled_rows(feedstock: Feedstock, release: Release) -> list[Row]:
    rows = []
    configs = feedstock.configurations()
    for pin in BUNDLED_PINS:
        found = release.text(pin.header)
        match = re.search(pin.pattern, found[1]) if found else None
        pins = sorted({value for config in configs for value in config.values_of(pin.key)})
        if not match:
            rows.append(
                Row(
                    "bundled version",
                    pin.key,
                    ", ".join(pins),
                    f"unknown: no {pin.header} in the wheels",
                    PERSON,
                    f"find the bundled version in the release tarball ({pin.header.removeprefix('torch/')})",
                )
            )
            continue
        bundled = pin.spelling(match[1])
        same = pins == [bundled]
        rows.append(
            Row(
                "bundled version",
                pin.key,
                ", ".join(pins),
                f"{bundled} ({pin.header})",
                SAME if same else PERSON,
                "" if same else pin.differs.format(bundled=bundled, pins=", ".join(pins)),
            )
        )
    return rows
