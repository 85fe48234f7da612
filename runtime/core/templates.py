"""The Markdown templates a family renders its prompts from, read once from its package.

    system = template(__package__, "planning.md").substitute(schema=...)

Each family keeps its prompts' text in `templates/*.md` beside its code,
shipped as package data; a template is a `string.Template` (`$name`
placeholders), read on first use and kept.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from string import Template

__all__ = ["template", "template_text"]


@cache
def template_text(package: str, name: str) -> str:
    """The text of `templates/<name>` in the package named `package`."""
    return files(package).joinpath("templates", name).read_text("utf-8")


def template(package: str, name: str) -> Template:
    """`template_text(package, name)` as a `string.Template`."""
    return Template(template_text(package, name))
