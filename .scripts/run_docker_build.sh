#!/usr/bin/env bash
# Build one configuration in conda-forge's build container (Linux host, or osx targets with OSX_SDK_DIR).
# Environment contract: docs/reference/ci.md. Required: CONFIG. Optional: DOCKER_IMAGE (else read from the
# configuration), UPLOAD_PACKAGES, IS_PR_BUILD, CI, CONDA_FORGE_DOCKER_RUN_ARGS, OSX_SDK_DIR and the
# variables passed into the container below.
set -euo pipefail

THISDIR="$(cd "$(dirname "$0")" && pwd)"
FEEDSTOCK_ROOT="$(cd "${THISDIR}/.." && pwd)"
RECIPE_ROOT="${FEEDSTOCK_ROOT}/recipe"
ARTIFACTS="${FEEDSTOCK_ROOT}/build_artifacts"
# shellcheck source=.scripts/logging_utils.sh
source "${THISDIR}/logging_utils.sh"

startgroup "Configure Docker"
if [[ -z "${CONFIG:-}" ]]; then
    echo "error: CONFIG is not set; use one of: $(cd "${FEEDSTOCK_ROOT}/.ci_support" && ls ./*.yaml | sed 's|^\./||; s|\.yaml$||' | tr '\n' ' ')" >&2
    exit 1
fi
CONFIG_FILE="${FEEDSTOCK_ROOT}/.ci_support/${CONFIG}.yaml"
if [[ ! -f "${CONFIG_FILE}" ]]; then
    echo "error: ${CONFIG_FILE} does not exist" >&2
    exit 1
fi
export FEEDSTOCK_NAME="${FEEDSTOCK_NAME:-$(basename "${FEEDSTOCK_ROOT}")}"
if [[ -z "${DOCKER_IMAGE:-}" ]]; then
    DOCKER_IMAGE="$(grep -A 1 '^docker_image:$' "${CONFIG_FILE}" | tail -n 1 | cut -b 3- || true)"
fi
if [[ -z "${DOCKER_IMAGE}" ]]; then
    echo "error: ${CONFIG} has no docker_image; set DOCKER_IMAGE" >&2
    exit 1
fi

docker info >/dev/null

# The container writes to the mounted feedstock as the host user, so build artifacts stay removable.
export HOST_USER_ID="$(id -u)"
export UPLOAD_PACKAGES="${UPLOAD_PACKAGES:-True}"
export IS_PR_BUILD="${IS_PR_BUILD:-False}"

mkdir -p "${ARTIFACTS}"
DONE_CANARY="${ARTIFACTS}/conda-forge-build-done-${CONFIG}"
rm -f "${DONE_CANARY}"

read -r -a docker_run_args <<< "${CONDA_FORGE_DOCKER_RUN_ARGS:-}"
if [[ -t 0 && -z "${CI:-}" ]]; then
    # interactive terminals only: a `conda debug` session ends in a shell
    docker_run_args=(-it "${docker_run_args[@]}")
fi
if [[ -n "${OSX_SDK_DIR:-}" ]]; then
    mkdir -p "${OSX_SDK_DIR}"
    docker_run_args+=(-v "$(cd "${OSX_SDK_DIR}" && pwd)":/opt/conda-sdks:rw,z,delegated -e OSX_SDK_DIR=/opt/conda-sdks)
fi
endgroup "Configure Docker"

startgroup "Start Docker"
docker run "${docker_run_args[@]}" \
    -v "${RECIPE_ROOT}":/home/conda/recipe_root:rw,z,delegated \
    -v "${FEEDSTOCK_ROOT}":/home/conda/feedstock_root:rw,z,delegated \
    -e CONFIG \
    -e HOST_USER_ID \
    -e UPLOAD_PACKAGES \
    -e IS_PR_BUILD \
    -e GIT_BRANCH \
    -e UPLOAD_ON_BRANCH \
    -e CI \
    -e FEEDSTOCK_NAME \
    -e CPU_COUNT \
    -e MAX_JOBS \
    -e DEBUG \
    -e REL_WITH_DEB_INFO \
    -e VERBOSE \
    -e MEGABUILD_VERBOSE \
    -e MEGABUILD_STRICT \
    -e BUILD_WITH_CONDA_DEBUG \
    -e BUILD_OUTPUT_ID \
    -e BINSTAR_TOKEN \
    -e FEEDSTOCK_TOKEN \
    -e STAGING_BINSTAR_TOKEN \
    "${DOCKER_IMAGE}" \
    bash /home/conda/feedstock_root/.scripts/build_steps.sh

# build_steps.sh touches the canary as its last step: a build that stopped early fails here.
test -f "${DONE_CANARY}"
