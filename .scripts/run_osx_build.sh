#!/usr/bin/env bash
# Build one configuration natively on macOS (CI runner or a maintainer's Mac), with a private
# Miniforge in MINIFORGE_HOME. Environment contract: docs/reference/ci.md. Required: CONFIG.
set -euo pipefail
# macOS runners ship bash 3.2: empty arrays are expanded with ${a[@]+"${a[@]}"} under set -u.

THISDIR="$(cd "$(dirname "$0")" && pwd)"
export FEEDSTOCK_ROOT="$(cd "${THISDIR}/.." && pwd)"
export RECIPE_ROOT="${FEEDSTOCK_ROOT}/recipe"
export CI_SUPPORT="${FEEDSTOCK_ROOT}/.ci_support"
export CONFIG_FILE="${CI_SUPPORT}/${CONFIG:?CONFIG is not set}.yaml"
MINIFORGE_HOME="${MINIFORGE_HOME:-${HOME}/miniforge3}"
MINIFORGE_HOME="${MINIFORGE_HOME%/}"
# shellcheck source=.scripts/logging_utils.sh
source "${THISDIR}/logging_utils.sh"

startgroup "Provisioning base env with micromamba"
if [[ ! -x "${MINIFORGE_HOME}/bin/conda" ]]; then
    micromamba_exe="$(mktemp -d)/micromamba"
    case "$(uname -m)" in arm64) runner_subdir=osx-arm64 ;; *) runner_subdir=osx-64 ;; esac
    curl -fsSL "https://micro.mamba.pm/api/micromamba/${runner_subdir}/latest" | tar -xj -C "$(dirname "${micromamba_exe}")" --strip-components=1 bin/micromamba
    "${micromamba_exe}" create --yes --root-prefix "${MINIFORGE_HOME}" --prefix "${MINIFORGE_HOME}" \
        --channel conda-forge python mamba conda
fi
# shellcheck disable=SC1091
source "${MINIFORGE_HOME}/etc/profile.d/conda.sh"
conda activate base
BUILD_COMMAND="$(python "${THISDIR}/ci_settings.py" build-command)"
read -r -a build_deps <<< "$(python "${THISDIR}/ci_settings.py" build-deps)"
mamba install --update-specs --yes --quiet --channel conda-forge --strict-channel-priority \
    pip "${build_deps[@]}" "conda-forge-ci-setup=4" "conda-build>=24.1"
endgroup "Provisioning base env with micromamba"

startgroup "Configuring conda"
setup_conda_rc "${FEEDSTOCK_ROOT}" "${RECIPE_ROOT}" "${CONFIG_FILE}"
source run_conda_forge_build_setup
make_build_number "${FEEDSTOCK_ROOT}" "${RECIPE_ROOT}" "${CONFIG_FILE}"
extra_options=()
if [[ "${BUILD_WITH_CONDA_DEBUG:-0}" != 1 ]]; then
    # conda-forge.yml's test policy for this target: osx-64 built on Apple silicon runs its tests under
    # Rosetta 2 (installed here on CI when missing; without it the build stops rather than upload untested)
    test_options="$(python "${THISDIR}/ci_settings.py" test-options "${CONFIG_FILE}")"
    read -r -a extra_options <<< "${test_options}"
fi
endgroup "Configuring conda"

if [[ "${BUILD_WITH_CONDA_DEBUG:-0}" == 1 ]]; then
    if [[ -n "${BUILD_OUTPUT_ID:-}" ]]; then
        extra_options+=(--output-id "${BUILD_OUTPUT_ID}")
    fi
    conda debug "${RECIPE_ROOT}" -m "${CONFIG_FILE}" ${extra_options[@]+"${extra_options[@]}"} \
        --clobber-file "${CI_SUPPORT}/clobber_${CONFIG}.yaml"
    /bin/bash
else
    "${BUILD_COMMAND}" "${RECIPE_ROOT}" -m "${CONFIG_FILE}" --suppress-variables ${extra_options[@]+"${extra_options[@]}"} \
        --clobber-file "${CI_SUPPORT}/clobber_${CONFIG}.yaml"
    startgroup "Validating outputs"
    validate_recipe_outputs "${FEEDSTOCK_NAME:-$(basename "${FEEDSTOCK_ROOT}")}"
    endgroup "Validating outputs"
    if [[ "${UPLOAD_PACKAGES:-True}" != "False" && "${IS_PR_BUILD:-False}" == "False" ]]; then
        startgroup "Uploading packages"
        upload_package --validate --feedstock-name="${FEEDSTOCK_NAME:-$(basename "${FEEDSTOCK_ROOT}")}" "${FEEDSTOCK_ROOT}" "${RECIPE_ROOT}" "${CONFIG_FILE}"
        endgroup "Uploading packages"
    fi
fi
