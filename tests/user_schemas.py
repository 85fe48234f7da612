"""A user's own schema folder, laid out as schemas/ is, as the documentation's examples write it."""

from __future__ import annotations

from pathlib import Path

COMMON = """\
{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://example.org/schemas/common.json",
  "$defs": {
    "Quantity": { "type": "integer", "minimum": 1 }
  }
}
"""

RECIPE = """\
{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://example.org/schemas/recipes/recipe.json",
  "title": "Recipe",
  "type": "object",
  "additionalProperties": false,
  "required": ["name", "servings"],
  "properties": {
    "name": { "type": "string", "minLength": 1, "maxLength": 80 },
    "servings": { "$ref": "../common.json#/$defs/Quantity" }
  }
}
"""

SOUP = '{"name": "Soup", "servings": 4}\n'
BROKEN = '{"name": "", "servings": 0, "spicy": true}\n'


def write_user_schemas(folder: Path) -> Path:
    """Write the folder (a family `recipes` with one contract, `recipe`, and `common.json`)."""
    (folder / "recipes").mkdir(parents=True)
    (folder / "common.json").write_text(COMMON, encoding="utf-8")
    (folder / "recipes" / "recipe.json").write_text(RECIPE, encoding="utf-8")
    return folder
