"""cmx's jinja2 templates (templates/ at the checkout's top, or inside an installed package): finding and
rendering them."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.settings import CHECKOUT

if TYPE_CHECKING:
    import jinja2

_CHECKOUT_TEMPLATES = CHECKOUT / "templates"
_PACKAGED_TEMPLATES = Path(__file__).resolve().parent / "_templates"  # where a wheel carries them


def templates_dir() -> Path:
    return _CHECKOUT_TEMPLATES if _CHECKOUT_TEMPLATES.is_dir() else _PACKAGED_TEMPLATES


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    # strict: a name the template uses but the caller did not pass is an error, never an empty string
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)


def render(name: str, **values: Any) -> str:
    """The template `name` (relative to templates/) rendered with `values`."""
    return _environment().get_template(name).render(**values)
