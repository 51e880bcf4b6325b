"""The framework recipes, installed as `dlbs.launchers` (see `dlbs.recipes`).

One module per framework registers a `Recipe` subclass with `@register_recipe(name)` and is
named in pyproject.toml's `dlbs.recipes` entry points.
"""
