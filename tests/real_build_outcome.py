"""What a real build of one of linux-64's jobs (both BLAS) must have done, whichever builder ran it:
tests/proofs/builders/test_rattler_build.py and test_real_build_conda.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conda_package_handling import api

from feedstock_tools.common.configuration import Configuration
from feedstock_tools.proofs.builders import real_build
from megabuild import python_target


def assert_a_job_of_both_blas(
    build: real_build.BuildOutcome, config: Configuration, expected: list[str], root: Path
) -> None:
    """Every output of the job was built (``expected``: the names its recipe renders, both BLAS), at the
    compile-work limit, and each BLAS's libtorch holds what its own pass 1 built: MKL's libtorch_cpu needs
    and calls MKL and its ATen/Config.h says so; the generic one's has no trace of it
    (docs/reference/megabuild.md, "The compiler cache")."""
    assert sorted(p.name.rsplit("-", 2)[0] for p in build.packages) == sorted(expected)
    linked = python_target.python_linked_targets("linux-64")
    ratio = real_build.compile_work_ratio(build.passes, linked, config.python_min)
    assert ratio.extra_blases == len(config.blases) - 1 == 1
    assert ratio.compiled == ratio.expected, ratio.formula()
    for label, by_target in ((kept.label, kept.by_target) for kept in build.passes):
        if label.startswith("2 libtorch"):
            assert by_target == {}, label
        elif label.startswith("4 pytorch"):
            assert set(by_target) <= set(linked), label
    libtorch = [p for p in build.packages if p.name.rsplit("-", 2)[0] == "libtorch"]
    assert sorted(p.name.rsplit("-", 1)[1].split("_")[1] for p in libtorch) == sorted(config.blases)
    for package in libtorch:
        mkl = "_mkl_" in package.name
        api.extract(str(package), str(root / package.name))
        library = root / package.name / "lib" / "libtorch_cpu.so"
        dynamic = subprocess.run(["readelf", "-d", "--dyn-syms", str(library)], check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
        assert ("[libmkl_rt.so.2]" in dynamic) is mkl, package.name
        assert (" UND mkl_get_max_threads" in dynamic) is mkl, package.name
        config_h = (root / package.name / "include" / "ATen" / "Config.h").read_text()
        assert f"#define AT_MKL_ENABLED() {int(mkl)}" in config_h, package.name
