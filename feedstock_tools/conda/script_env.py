"""conda-build's ``build/script_env``: what it adds to the environment of a build script.

conda-build 26.7.1 reads the rendered list twice, alike: for the top-level build (``environ.py:535-545``
``meta_vars``) and for an output's script (``build.py:1785-1797``). An entry ``NAME=value`` sets NAME to the
text after the first ``=`` (so the recipe hands the script a value of its own, rendered per configuration);
a plain ``NAME`` passes the caller's value through, and is left out, with a warning, when the caller has
none. The recipe uses both (recipe/meta.yaml: the caller's build switches, and ``MEGABUILD_CUDA_ARCH_LIST``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def script_environment(script_env: Sequence[str], caller: Mapping[str, str]) -> dict[str, str]:
    """The variables ``script_env`` (as rendered) gives a build script run from ``caller``'s environment."""
    added = {}
    for entry in script_env:
        name, is_set, value = str(entry).partition("=")
        if is_set:
            added[name] = value
        elif name in caller:
            added[name] = caller[name]
    return added
