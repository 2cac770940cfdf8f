"""conda-build's ``load_file_data`` Jinja function, emulated for the recipe renders of this project.

conda-build 26.7.1 ``jinja_context.py``: ``load_file_data(filename, fmt=None, *args, config, from_recipe_dir,
recipe_dir, permit_undefined_jinja, **kwargs)`` finds the file (``_find_file``: an absolute path as it is,
with ``from_recipe_dir=True`` relative to the recipe directory, else relative to the work directory, which
holds the source only once it is unpacked) and parses it by ``fmt`` or the file's suffix (``_file_parsers``:
json, yaml/yml, toml); a missing file renders as ``{}`` while undefined Jinja is permitted, else it raises.

The emulation renders before any source exists, so it reads from the recipe directory only: a recipe that
asks for the work directory is an error naming the fix (``from_recipe_dir=True``), and a missing or
unparsable file is an error, never ``{}``: conda-build's final render would fail on it too. TOML is left
out (Python 3.10, which the tools support, has no ``tomllib``; the recipe reads JSON).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.common.errors import ToolError

_PARSERS: dict[str, Callable[[str], Any]] = {
    "json": json.loads,
    "yaml": yaml.safe_load,
    "yml": yaml.safe_load,
}


def load_file_data_in(recipe_dir: Path, permit_missing: bool = False) -> Callable[..., Any]:
    """The ``load_file_data`` of a render of the recipe in ``recipe_dir``; ``permit_missing``: a missing file
    is ``{}``, as on conda-build's passes that permit undefined Jinja (its first pass)."""

    def load_file_data(
        filename: str, fmt: str | None = None, *_: Any, from_recipe_dir: bool = False, **__: Any
    ) -> Any:
        path = Path(filename)
        if not path.is_absolute():
            if not from_recipe_dir:
                raise ToolError(
                    f"{recipe_dir / 'meta.yaml'}: load_file_data({filename!r}) reads the work directory, "
                    "which holds no source before the build: pass from_recipe_dir=True for a recipe file"
                )
            path = recipe_dir / path
        kind = (fmt or path.suffix.lstrip(".")).lower()
        parse = _PARSERS.get(kind)
        if parse is None:
            raise ToolError(
                f"load_file_data({filename!r}): unknown format {kind!r}; use one of {sorted(_PARSERS)}"
            )
        if permit_missing and not path.is_file():
            return {}
        try:
            return parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
            raise ToolError(f"load_file_data({filename!r}): cannot read {path}: {exc}") from None

    return load_file_data
