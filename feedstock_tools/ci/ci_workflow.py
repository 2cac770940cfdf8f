"""The job matrix of ``.github/workflows/conda-build.yml``: one entry per CI file, runners as conda-smithy
picks them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.ci.ci_config import CiConfig
from feedstock_tools.common.errors import ToolError
from feedstock_tools.conda.variants import as_list

WORKFLOW = Path(".github") / "workflows" / "conda-build.yml"

# Runner labels per build platform (conda-smithy 2026.8.5 configure_feedstock.py: GITHUB_ACTIONS_RUNS_ON):
# "hosted" (or "default") in github_actions_labels means the hosted labels; a "self-hosted@<label>" entry
# adds the self-hosted ones and "self-hosted".
SELF_HOSTED_LABELS = {
    "linux-64": ["linux", "x64"],
    "linux-aarch64": ["linux", "ARM64"],
    "osx-64": ["macOS", "x64"],
    "osx-arm64": ["macOS", "arm64"],
}
HOSTED_LABELS = {
    "linux-64": ["ubuntu-latest"],
    "linux-aarch64": ["ubuntu-24.04-arm"],
    "osx-64": ["macos-15-intel"],
    "osx-arm64": ["macos-15"],
}


def runner_labels(config: CiConfig) -> list[str]:
    """``runs-on`` of a job: conda-smithy 2026.8.5 ``_github_actions_specific_setup``."""
    labels = [str(label) for label in as_list(config.data.get("github_actions_labels") or ["hosted"])]
    if labels in (["hosted"], ["default"]):
        labels = list(HOSTED_LABELS[config.build_platform])
    elif any(label.startswith("self-hosted@") for label in labels):
        self_hosted = [*SELF_HOSTED_LABELS[config.build_platform], "self-hosted"]
        labels = list(dict.fromkeys([label.replace("self-hosted@", "") for label in labels] + self_hosted))
    # cirun provisions one VM per job, so its label must be unique per run and configuration; namespace's
    # Linux profiles get container settings.
    return [
        label
        + ("--${{ github.run_id }}-" + config.short_name if label.startswith("cirun-") else "")
        + (
            ";container.privileged=true;container.mount-scratch=true"
            if label.startswith("namespace-profile-") and "-on-linux-" in label
            else ""
        )
        for label in labels
    ]


def workflow_matrix(configs: Sequence[CiConfig]) -> list[dict[str, Any]]:
    """One matrix entry per CI file: the environment the job hands to ``.scripts/``."""
    entries = []
    for config in configs:
        runs_on = runner_labels(config)
        entry: dict[str, Any] = {
            "CONFIG": config.name,
            "SHORT_CONFIG": config.short_name,
            "UPLOAD_PACKAGES": "True",
            "os": "ubuntu" if config.build_platform.startswith("linux") else "macos",
            "runs_on": runs_on,
        }
        if config.build_platform.startswith("linux"):
            entry["DOCKER_IMAGE"] = config.data["docker_image"][0]
            # GPU runners pass the GPUs into the build container so the CUDA tests run.
            if any("gpu" in label.lower() for label in runs_on):
                entry["CONDA_FORGE_DOCKER_RUN_ARGS"] = "--gpus all"
        entries.append(entry)
    return entries


TIMEOUT_LINE = re.compile(r"^(    timeout-minutes: )\d+$", flags=re.MULTILINE)
MATRIX_BEGIN = "        # BEGIN generated matrix: python -m feedstock_tools render-ci"
MATRIX_END = "        # END generated matrix"


def render_workflow_matrix(configs: Sequence[CiConfig]) -> str:
    """The ``include:`` entries of the workflow's job matrix, as YAML lines indented for the file."""
    entries = workflow_matrix(configs)
    body = yaml.safe_dump(entries, default_flow_style=False, sort_keys=True, width=1000)
    indented = "".join("          " + line + "\n" if line else "\n" for line in body.splitlines())
    return f"{MATRIX_BEGIN}\n{indented}{MATRIX_END}\n"


def splice_matrix(workflow_text: str, matrix: str) -> str:
    """The workflow with its generated matrix block replaced."""
    start = workflow_text.find(MATRIX_BEGIN)
    end = workflow_text.find(MATRIX_END)
    if start < 0 or end < start:
        raise ToolError(f"{WORKFLOW}: the generated-matrix markers are missing; restore them from git")
    end = workflow_text.index("\n", end) + 1
    return workflow_text[:start] + matrix + workflow_text[end:]
