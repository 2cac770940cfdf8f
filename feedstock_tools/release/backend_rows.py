"""The build backend of a release (its wheels' ``WHEEL`` Generator) in the recipe's host."""

from __future__ import annotations

import re

from feedstock_tools.maintainer.version_compare import version_numbers
from feedstock_tools.release import recipe_edit
from feedstock_tools.release.release_metadata import Release, dist_info_member
from feedstock_tools.release.rows import CHANGED, PERSON, SAME, Row

# The PEP 517 backend the driver builds with when a release's wheels name it in their WHEEL file
# ("Generator: scikit-build-core 1.1.1" for 2.14.1 and 2.15.0, "setuptools (81.0.0)" for 2.13.0): the recipe
# names it in the host, which is also how the rehearsal picks the stand-in (proofs/rehearsal/standins.py).
SKBUILD = "scikit-build-core"
_GENERATOR = re.compile(r"^Generator: (?P<name>[\w.-]+) \(?(?P<version>[\d.]+)\)?$", re.MULTILINE)


def backend_change(release: Release, meta: str) -> tuple[str, list[Row]]:
    """scikit-build-core in the host at the lowest version any wheel names, or none for a setuptools
    release."""
    generators: dict[str, set[str]] = {}
    for source in release.wheels.values():
        member = dist_info_member(source, "WHEEL")
        match = _GENERATOR.search(source.text(member) or "") if member else None
        if match:
            generators.setdefault(match["name"], set()).add(match["version"])
    if len(generators) != 1:
        named = ", ".join(sorted(generators)) or "none"
        return meta, [
            Row(
                "build backend",
                "WHEEL Generator",
                "",
                named,
                PERSON,
                "the wheels disagree or name none: set the host's backend by hand in recipe/meta.yaml's "
                "python_host_unpinned list",
            )
        ]
    ((name, versions),) = generators.items()
    tools = {tool.split()[0]: tool for tool in recipe_edit.python_host_tools(meta)}
    old = tools.get(SKBUILD, "(no scikit-build-core)")
    if name == SKBUILD:
        spec = ">=" + min(versions, key=version_numbers)
        new_meta = recipe_edit.set_python_host_tool(meta, SKBUILD, spec)
        new = f"{SKBUILD} {spec}"
    else:
        new_meta = recipe_edit.set_python_host_tool(meta, SKBUILD, None)
        new = "(no scikit-build-core)"
    shown = ", ".join(f"{name} {v}" for v in sorted(versions, key=version_numbers))
    row = Row(
        "build backend",
        "host (WHEEL Generator: " + shown + ")",
        old,
        new,
        CHANGED if new_meta != meta else SAME,
        "setuptools stays in the host until the tarball's pyproject.toml [build-system] says otherwise"
        if new_meta != meta
        else "",
    )
    return new_meta, [row]
