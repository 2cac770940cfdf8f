#!/usr/bin/env bash
# conda-build runs this for the top-level recipe (libtorch-split, megabuild pass 1) and for every output with
# `script: build.sh`. All logic lives in the megabuild driver (recipe/megabuild, standard library only); it
# runs under the build environment's Python because not every output has python in its host environment.
set -euo pipefail
export PYTHONPATH="${RECIPE_DIR}${PYTHONPATH:+:${PYTHONPATH}}"
exec "${BUILD_PREFIX}/bin/python" -m megabuild "$@"
