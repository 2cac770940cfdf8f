#!/usr/bin/env bash
# Runs inside the build container (started by run_docker_build.sh): installs the build tools, then
# builds .ci_support/${CONFIG}.yaml with conda-build (or boa's mambabuild, per conda-forge.yml).
# Environment contract: docs/reference/ci.md.
set -euo pipefail
if [[ "${VERBOSE:-0}" == 1 ]]; then
    set -x
fi

export FEEDSTOCK_ROOT="${FEEDSTOCK_ROOT:-/home/conda/feedstock_root}"
export RECIPE_ROOT="${RECIPE_ROOT:-/home/conda/recipe_root}"
export CI_SUPPORT="${FEEDSTOCK_ROOT}/.ci_support"
export CONFIG_FILE="${CI_SUPPORT}/${CONFIG}.yaml"
export PYTHONUNBUFFERED=1
# shellcheck source=.scripts/logging_utils.sh
source "${FEEDSTOCK_ROOT}/.scripts/logging_utils.sh"
endgroup "Start Docker"

startgroup "Configuring conda"
BUILD_COMMAND="$(python "${FEEDSTOCK_ROOT}/.scripts/ci_settings.py" build-command)"
read -r -a build_deps <<< "$(python "${FEEDSTOCK_ROOT}/.scripts/ci_settings.py" build-deps)"

cat > ~/.condarc <<CONDARC
conda-build:
  root-dir: ${FEEDSTOCK_ROOT}/build_artifacts
pkgs_dirs:
  - ${FEEDSTOCK_ROOT}/build_artifacts/pkg_cache
  - /opt/conda/pkgs
solver: libmamba
CONDARC

mamba install --update-specs --yes --quiet --channel conda-forge --strict-channel-priority \
    pip mamba "${build_deps[@]}" "conda-forge-ci-setup=4" "conda-build>=24.1"

# conda-forge-ci-setup: channels from the configuration, build number clobber, CPU_COUNT etc.
setup_conda_rc "${FEEDSTOCK_ROOT}" "${RECIPE_ROOT}" "${CONFIG_FILE}"
source run_conda_forge_build_setup
make_build_number "${FEEDSTOCK_ROOT}" "${RECIPE_ROOT}" "${CONFIG_FILE}"

extra_options=()
if [[ "${BUILD_WITH_CONDA_DEBUG:-0}" != 1 ]]; then
    # conda-forge.yml's test policy for this target: cross-compiled linux targets run their tests
    # under qemu (the workflow registers it), or --no-test
    test_options="$(python "${FEEDSTOCK_ROOT}/.scripts/ci_settings.py" test-options "${CONFIG_FILE}")"
    read -r -a extra_options <<< "${test_options}"
fi
endgroup "Configuring conda"

if [[ -f "${FEEDSTOCK_ROOT}/LICENSE.txt" ]]; then
    cp "${FEEDSTOCK_ROOT}/LICENSE.txt" "${RECIPE_ROOT}/recipe-scripts-license.txt"
fi

if [[ "${BUILD_WITH_CONDA_DEBUG:-0}" == 1 ]]; then
    if [[ -n "${BUILD_OUTPUT_ID:-}" ]]; then
        extra_options+=(--output-id "${BUILD_OUTPUT_ID}")
    fi
    conda debug "${RECIPE_ROOT}" -m "${CONFIG_FILE}" "${extra_options[@]}" \
        --clobber-file "${CI_SUPPORT}/clobber_${CONFIG}.yaml"
    # drop into the debug environment
    /bin/bash
else
    "${BUILD_COMMAND}" "${RECIPE_ROOT}" -m "${CONFIG_FILE}" --suppress-variables "${extra_options[@]}" \
        --clobber-file "${CI_SUPPORT}/clobber_${CONFIG}.yaml"

    startgroup "Inspecting artifacts"
    inspect_artifacts || echo "inspect_artifacts needs conda-forge-ci-setup >=4.6.0"
    endgroup "Inspecting artifacts"

    startgroup "Validating outputs"
    validate_recipe_outputs "${FEEDSTOCK_NAME}"
    endgroup "Validating outputs"

    startgroup "Uploading packages"
    if [[ "${UPLOAD_PACKAGES}" != "False" && "${IS_PR_BUILD}" == "False" ]]; then
        upload_package --validate --feedstock-name="${FEEDSTOCK_NAME}" "${FEEDSTOCK_ROOT}" "${RECIPE_ROOT}" "${CONFIG_FILE}"
    fi
    endgroup "Uploading packages"
fi

touch "${FEEDSTOCK_ROOT}/build_artifacts/conda-forge-build-done-${CONFIG}"
