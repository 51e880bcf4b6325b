"""Helpers for planner tests: plan a spec given as Python data, without default configs."""

from __future__ import annotations

from typing import Any

from dlbs.config.loader import SpecBuilder, load_spec
from dlbs.plan.builder import Planner


def plan_doc(document: dict[str, Any], env: dict[str, str] | None = None,
             params: tuple[str, ...] = (), variables: tuple[str, ...] = (),
             extensions: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    builder = SpecBuilder()
    builder.add_layer(document, "spec.yaml")
    builder.add_cli(params, variables, extensions)
    return list(Planner(builder.spec, env or {}).experiments())


def plan_file(path, **kwargs: Any) -> list[dict[str, Any]]:
    return list(Planner(load_spec(path, **kwargs), {}).experiments())
