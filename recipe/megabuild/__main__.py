"""``python -m megabuild``: the build driver conda-build runs through recipe/build.sh for every output."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from megabuild import interrupt, passes, report, skbuild
from megabuild.conda_env import CondaBuild
from megabuild.errors import MegabuildError, os_error_line
from megabuild.package_files import PACKAGES
from megabuild.staging import SHLIB_EXTS, UpstreamTrees, stage_package

DESCRIPTION = """\
Build driver of the pytorch feedstock's megabuild: one compile of PyTorch per configuration, split into
packages. conda-build runs recipe/build.sh (recipe/bld.bat on Windows), which runs this, once for the
top-level recipe and once for each output; the pass is chosen by $PKG_NAME:

  libtorch-split        pass 1: configure and build everything (python setup.py build), MAGMA off
  libtorch              stage the C++ libraries, headers and CMake files into $PREFIX
  libtorch-cuda-linalg  magma_variant=nomagma: stage pass 1's library; magma: USE_MAGMA=ON in
                        build/CMakeCache.txt, rebuild (only torch_cuda_linalg compiles), stage
  pytorch               retarget the CMake cache to $PYTHON, build (only torch_python compiles), stage

It reads conda-build's environment (PKG_NAME, PREFIX, BUILD_PREFIX, SRC_DIR, RECIPE_DIR, PYTHON, SP_DIR,
CPU_COUNT, target_platform, on Windows LIBRARY_PREFIX, and the variant keys blas_impl, cuda_compiler_version,
magma_variant). For local debugging builds it honours DEBUG=1, REL_WITH_DEB_INFO=1 and MAX_JOBS. After every
pass it writes build/megabuild-report.json and prints what each pass compiled. docs/reference/megabuild.md has
the details.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m megabuild",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run the pass for $PKG_NAME (the default when no command is given)")
    for target in (parser, run):
        target.add_argument(
            "--verbose",
            action="store_true",
            default=os.environ.get("MEGABUILD_VERBOSE", "") not in ("", "0"),
            help="full compiler command lines (also MEGABUILD_VERBOSE=1)",
        )
        target.add_argument(
            "--strict",
            action="store_true",
            default=os.environ.get("MEGABUILD_STRICT", "") not in ("", "0"),
            help="fail a pass that compiles objects outside its expected targets (also MEGABUILD_STRICT=1)",
        )
    stage = sub.add_parser(
        "stage",
        help="stage one package from given upstream trees into a prefix (no conda-build needed)",
        description="Place the files of PACKAGE from the upstream trees into PREFIX by the staging table.",
    )
    stage.add_argument("package", choices=PACKAGES)
    stage.add_argument("--install-tree", type=Path, help="CMake's install prefix, <src>/torch")
    stage.add_argument("--setuptools-tree", type=Path, help="build/lib.<platform>-cpython-3XX")
    stage.add_argument("--metadata-tree", type=Path, help="directory holding torch-<version>.dist-info")
    stage.add_argument("--prefix", type=Path, required=True)
    stage.add_argument("--sp-dir", type=Path, help="site-packages inside PREFIX (for pytorch)")
    stage.add_argument(
        "--shlib-ext",
        choices=SHLIB_EXTS,
        default=os.environ.get("SHLIB_EXT", ".so"),
        help="how the trees name shared libraries: .so (linux), .dylib (osx) or .dll (win: conda's Windows "
        "layout, Library/bin, Library/lib, ...); default $SHLIB_EXT or .so",
    )
    show = sub.add_parser("report", help="print the per-pass table of a build directory")
    show.add_argument("build_dir", type=Path, nargs="?", default=Path("build"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    interrupt.install()
    try:
        if args.command == "stage":
            trees = UpstreamTrees(
                args.install_tree, args.setuptools_tree, args.metadata_tree, shlib_ext=args.shlib_ext
            )
            staged = stage_package(args.package, trees, args.prefix, args.sp_dir)
            print(f"staged {len(staged.files)} file(s) and {len(staged.links)} link(s) for {args.package}")
            return 0
        if args.command == "report":
            records = report.load(args.build_dir)
            if not records:
                raise MegabuildError(f"no {report.REPORT_NAME} in {args.build_dir}: run a megabuild first")
            print(report.table(records))
            return 0
        build = CondaBuild.from_environ()
        passes.run(
            build,
            dict(os.environ),
            passes.Options(verbose=args.verbose, strict=args.strict),
            kinds=(passes.SETUP_PY, skbuild.KIND),
        )
        return 0
    except interrupt.Interrupted as exc:
        pkg_name = os.environ.get("PKG_NAME") if args.command in (None, "run") else None
        print(f"megabuild error: {exc.line(pkg_name, passes.TOP_LEVEL)}", file=sys.stderr, flush=True)
        return exc.exit_status
    except MegabuildError as exc:
        print(f"megabuild error: {exc}", file=sys.stderr, flush=True)
        return 1
    except OSError as exc:  # a full, read-only or missing directory: the cause and the fix, not a traceback
        print(f"megabuild error: {os_error_line(exc)}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
