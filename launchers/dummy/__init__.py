"""The dummy backend's recipe: the engine's test double (see benchmarks.py beside it)."""

from __future__ import annotations

from launchers import Recipe, register_recipe


@register_recipe("dummy")
class DummyRecipe(Recipe):
    container_folder = "dummy"
