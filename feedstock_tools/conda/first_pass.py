"""conda-build's first render pass: the recipe rendered before any variant is known.

``MetaData.__init__`` parses ``meta.yaml`` once with ``permit_undefined_jinja=True`` before it knows a
variant (conda-build 26.7.1 ``metadata.py: MetaData.__init__ -> parse_again``); conda-smithy's rerender,
its linter and ``conda render recipe`` all go through it. Every variant key (``cuda_compiler_version``,
``blas_impl``, ...) is then undefined, and conda-build renders undefined names with its
``UndefinedNeverFail`` (``jinja_context.py``), whose behaviour, read from that source, is:

- arithmetic, calling, indexing and ``<``/``<=``/``>``/``>=`` give another undefined value;
- ``str()`` is ``""``, ``int()`` is 0, ``float()`` is 0.0; truth is False and ``==`` is True only against
  another undefined value (both from ``jinja2.Undefined``), so ``x != "None"`` is True;
- an attribute it does not have is ``None`` (its ``__getattr__`` records the use and returns nothing), so
  ``x.replace(".", "")`` calls ``None``: ``TypeError: 'NoneType' object is not callable``.

:func:`render_first_pass` renders the recipe that way, then applies the selectors (unknown names are
False, as in conda-build's ``eval_selector``) and reads the YAML, so a recipe that cannot survive the
first pass fails here with the line conda-build would report. Jinja and YAML are the other renders'
(:mod:`feedstock_tools.conda.meta_render`).
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
import yaml

from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.inputs import read_text
from feedstock_tools.conda import meta_render
from feedstock_tools.conda.selectors import select_lines, selector_namespace
from feedstock_tools.conda.yaml_errors import rendered_yaml_error

# The names conda-build defines on the first pass that this recipe reads besides the selector namespace:
# its Jinja functions (jinja_context.py context_processor) and the package variables (environ.py get_dict).
# Their values do not matter on this pass; each returns text, as conda-build's do.
_FUNCTIONS = ("compiler", "stdlib", "pin_subpackage", "pin_compatible", "cdt")


class NeverFailUndefined(jinja2.Undefined):
    """A test double of conda-build's ``UndefinedNeverFail`` (behaviour listed in the module docstring)."""

    def _undefined(self, *_: Any, **__: Any) -> NeverFailUndefined:
        return NeverFailUndefined(name=self._undefined_name)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _undefined
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _undefined
    __pow__ = __rpow__ = __pos__ = __neg__ = __call__ = __getitem__ = _undefined
    __lt__ = __le__ = __gt__ = __ge__ = _undefined  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return None

    def __str__(self) -> str:
        return ""

    def __int__(self) -> int:
        return 0

    def __float__(self) -> float:
        return 0.0


def _template_line(exc: BaseException) -> int | None:
    """The meta.yaml line of the innermost template frame of ``exc``'s traceback."""
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == "<template>"]
    return frames[-1].lineno if frames else None


def render_first_pass(
    recipe_dir: Path, subdir: str, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``recipe_dir/meta.yaml`` as conda-build's first pass reads it for ``subdir`` (no variant)."""
    meta_path = recipe_dir / "meta.yaml"
    if not meta_path.is_file():
        raise ToolError(f"no meta.yaml in {recipe_dir}; pass the recipe directory")
    text = read_text(meta_path)
    namespace = selector_namespace(subdir, {"target_platform": subdir}, dict(environ or {}))
    context: dict[str, Any] = {key: value for key, value in namespace.items() if key != "os"}
    context.update({name: (lambda *args, **kwargs: "") for name in _FUNCTIONS})
    context.update(
        PKG_NAME="", PKG_VERSION="", PKG_BUILDNUM="0", PKG_HASH="1234567", environ=dict(environ or {})
    )
    try:
        rendered = meta_render.template(text, NeverFailUndefined).render(**context)
    except jinja2.TemplateSyntaxError as exc:
        raise ToolError(f"{meta_path} line {exc.lineno}: Jinja syntax error: {exc.message}") from None
    except (
        Exception
    ) as exc:  # conda-build lets any Python error of the template escape: report it as it would
        line = _template_line(exc)
        where = f"{meta_path} line {line}" if line else str(meta_path)
        raise ToolError(
            f"{where}: {type(exc).__name__}: {exc} on conda-build's first render pass, where variant keys "
            "are undefined (use Jinja filters, not methods, on variant values)"
        ) from None
    selected = select_lines(rendered, namespace)
    try:
        data = meta_render.load(selected)
    except yaml.YAMLError as exc:
        raise rendered_yaml_error(meta_path, exc, selected) from None
    if not isinstance(data, dict):
        raise ToolError(f"{meta_path} does not render to a mapping on the first pass")
    return data
