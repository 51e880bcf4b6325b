"""The dummy backend's recipe: the engine's test double (python/dummy_benchmarks)."""

from __future__ import annotations

from dlbs.recipes.recipe import Recipe, register_recipe


@register_recipe("dummy")
class DummyRecipe(Recipe):
    container_folder = "dummy_benchmarks"
    simulates_devices = True  # it records the devices it is given and touches none
