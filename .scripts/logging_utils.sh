#!/usr/bin/env bash
# Collapsible log groups: GitHub Actions folds "::group::" blocks; elsewhere a plain marker line.
# Sourced by run_docker_build.sh, build_steps.sh and run_osx_build.sh.

function startgroup {
    if [[ "${CI:-}" == "github_actions" ]]; then
        echo "::group::$1"
    else
        echo "==> $1"
    fi
}

function endgroup {
    if [[ "${CI:-}" == "github_actions" ]]; then
        echo "::endgroup::"
    fi
}
