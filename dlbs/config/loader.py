"""Read spec files (JSON or YAML 1.2), follow includes and merge layers into one Spec.

Layer order (docs/language.md section 1): the default configs in `configs/` (sorted by file
name), then each file's includes, then the file itself, then `-P/-V/-E` from the CLI.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dlbs.config.spec import DEFINITION_KEYS, Axis, Extension, ParamDef, Spec
from dlbs.config.values import TYPES, type_name
from dlbs.errors import ConfigError

TOP_LEVEL_KEYS = ("parameters", "variables", "extensions", "include")
EXTENSION_KEYS = ("condition", "parameters", "cases", "error")
CLI_SOURCE = "<command line>"


def default_config_dir() -> Path:
    """Where the default configs live: `$DLBS_CONFIGS`, else `configs/` of this checkout."""
    override = os.environ.get("DLBS_CONFIGS")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "configs"


def default_config_files() -> list[Path]:
    folder = default_config_dir()
    if not folder.is_dir():
        raise ConfigError(f"default configs not found in {folder}",
                          hint="set DLBS_CONFIGS to the configs/ folder of a dlbs checkout")
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml", ".json"))


def suggest(word: str, candidates: Iterable[str], n: int = 3) -> str | None:
    """A 'did you mean' hint naming the closest candidates, or None."""
    close = difflib.get_close_matches(word, list(candidates), n=n, cutoff=0.6)
    if not close:
        return None
    return "did you mean " + " or ".join(repr(c) for c in close) + "?"


def read_document(path: Path) -> Any:
    """Parse one JSON or YAML file; syntax errors name the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{path}:{error.lineno}:{error.colno}: malformed JSON: "
                              f"{error.msg}") from None
    if suffix in (".yaml", ".yml"):
        return _read_yaml(path, text)
    raise ConfigError(f"{path}: unsupported file type {path.suffix!r}",
                      hint="specs are .json, .yaml or .yml files")


def _read_yaml(path: Path, text: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    # The pure-Python safe loader follows YAML 1.2 (core schema): `no` stays a string.
    yaml = YAML(typ="safe", pure=True)
    try:
        return yaml.load(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = error.problem or error.context or "syntax error"
        start = error.context_mark
        if error.context and start is not None and mark is not None and start.line != mark.line:
            problem += f" ({error.context} started at line {start.line + 1})"
        raise ConfigError(f"{where}: malformed YAML: {problem}") from None
    except YAMLError as error:
        raise ConfigError(f"{path}: malformed YAML: {error}") from None


class SpecBuilder:
    """Accumulates layers into a Spec, in the order they are added."""

    def __init__(self) -> None:
        self.spec = Spec()

    # -- files -----------------------------------------------------------------------------
    def add_file(self, path: str | Path, _stack: tuple[Path, ...] = ()) -> None:
        path = Path(path)
        real = path.resolve()
        if real in _stack:
            chain = " -> ".join(str(p) for p in (*_stack, real))
            raise ConfigError(f"include cycle: {chain}")
        document = read_document(path)
        if document is None:
            document = {}
        _check_object(document, TOP_LEVEL_KEYS, str(path), "a spec", "top-level key")
        includes = document.get("include", [])
        if isinstance(includes, str):
            includes = [includes]
        if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
            raise ConfigError(f"{path}: 'include' must be a list of file paths")
        for include in includes:
            target = Path(include)
            if not target.is_absolute():
                target = path.parent / target
            self.add_file(target, (*_stack, real))
        self.spec.files.append(str(path))
        self.add_layer(document, str(path))

    # -- one layer ---------------------------------------------------------------------------
    def add_layer(self, document: dict[str, Any], source: str) -> None:
        params = document.get("parameters", {}) or {}
        variables = document.get("variables", {}) or {}
        extensions = document.get("extensions", []) or []
        if not isinstance(params, dict):
            raise ConfigError(f"{source}: 'parameters' must be an object, not a "
                              f"{type_name(params)}")
        if not isinstance(variables, dict):
            raise ConfigError(f"{source}: 'variables' must be an object, not a "
                              f"{type_name(variables)}")
        if not isinstance(extensions, list):
            raise ConfigError(f"{source}: 'extensions' must be a list, not a "
                              f"{type_name(extensions)}")
        for name, value in params.items():
            self.set_parameter(str(name), value, source)
        for name, items in variables.items():
            self.set_axis(str(name), items, source)
        for index, extension in enumerate(extensions):
            self.add_extension(extension, f"{source}: extension #{index + 1}")

    def set_parameter(self, name: str, value: Any, source: str) -> None:
        _check_name(name, source)
        current = self.spec.params.get(name)
        if isinstance(value, dict) and "val" in value:
            definition = _parse_definition(name, value, source)
            if current is not None:
                # A redefinition replaces the fields it gives and keeps the others.
                for key in ("type", "desc", "choices", "regex"):
                    if key in value or (key == "choices" and "val_domain" in value) or (
                            key == "regex" and "val_regex" in value):
                        continue
                    setattr(definition, key, getattr(current, key))
                definition.host = definition.host or current.host
            self.spec.params[name] = definition
        elif current is not None:
            current.value = value
            current.source = source
        else:
            self.spec.params[name] = ParamDef(name, value, source)

    def set_axis(self, name: str, items: Any, source: str) -> None:
        _check_name(name, source)
        if not isinstance(items, list):
            items = [items]
        declared = self.spec.params.get(name)
        is_dict_param = declared is not None and declared.type == "dict"
        objects = [isinstance(item, dict) for item in items]
        zipped = bool(items) and all(objects) and not is_dict_param
        if any(objects) and not all(objects) and not is_dict_param:
            raise ConfigError(f"{source}: variable {name!r} mixes objects and values",
                              hint="an axis of objects sets all their keys together; "
                                   "give every item as an object")
        if zipped:
            for item in items:
                for key in item:
                    _check_name(str(key), source)
        axis = Axis(name, items, source, zipped)
        # Replacing keeps the axis's place in the product; a new axis comes last.
        self.spec.axes[name] = axis

    def add_extension(self, extension: Any, source: str) -> None:
        _check_object(extension, EXTENSION_KEYS, source, "an extension", "extension key")
        condition = extension.get("condition", {}) or {}
        parameters = extension.get("parameters", {}) or {}
        cases = extension.get("cases", []) or []
        if not isinstance(condition, dict):
            raise ConfigError(f"{source}: 'condition' must be an object of name: test")
        if not isinstance(parameters, dict):
            raise ConfigError(f"{source}: 'parameters' must be an object")
        if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
            raise ConfigError(f"{source}: 'cases' must be a list of objects")
        for name, test in condition.items():
            _check_name(str(name), source)
            if isinstance(test, str):
                try:
                    re.compile(test)
                except re.error as error:
                    raise ConfigError(f"{source}: condition on {name!r}: invalid regular "
                                      f"expression {test!r}: {error}") from None
            elif isinstance(test, dict):
                raise ConfigError(f"{source}: condition on {name!r}: a test is a regular "
                                  f"expression, a list of values or a value, not an object")
        for name in [*parameters, *(k for case in cases for k in case)]:
            _check_name(str(name), source)
        error = extension.get("error")
        if error is not None:
            # A rule (docs/language.md section 7): it refuses what it matches, sets nothing.
            if not isinstance(error, str) or not error.strip():
                raise ConfigError(f"{source}: 'error' must be a message (a non-empty string)")
            if parameters or cases:
                raise ConfigError(f"{source}: an extension with 'error' refuses the "
                                  f"experiments it matches; it cannot also set parameters",
                                  hint="split it into two extensions")
        self.spec.extensions.append(Extension(dict(condition), dict(parameters),
                                              [dict(c) for c in cases], source, error))

    # -- the command line --------------------------------------------------------------------
    def add_cli(self, params: Sequence[str] = (), variables: Sequence[str] = (),
                extensions: Sequence[str] = ()) -> None:
        for assignment in params:
            name, value = _split_assignment(assignment, "-P")
            self.set_parameter(name, _json_or_raw(value), CLI_SOURCE)
        for assignment in variables:
            name, value = _split_assignment(assignment, "-V")
            self.set_axis(name, _json_or_raw(value), CLI_SOURCE)
        for index, text in enumerate(extensions):
            try:
                extension = json.loads(text)
            except json.JSONDecodeError as error:
                raise ConfigError(f"{CLI_SOURCE}: -E #{index + 1} is not JSON: {error.msg} "
                                  f"(column {error.colno})") from None
            self.add_extension(extension, f"{CLI_SOURCE}: -E #{index + 1}")


def load_spec(config: str | Path | None = None, *, defaults: bool = True,
              params: Sequence[str] = (), variables: Sequence[str] = (),
              extensions: Sequence[str] = ()) -> Spec:
    """Merge the default configs, `config` (with its includes) and the CLI overrides."""
    builder = SpecBuilder()
    if defaults:
        for path in default_config_files():
            builder.add_file(path)
    if config is not None:
        builder.add_file(config)
    builder.add_cli(params, variables, extensions)
    return builder.spec


def _check_object(value: Any, keys: Sequence[str], source: str, what: str, key_kind: str) -> None:
    """`value` must be an object whose keys are among `keys`; suggest the closest one."""
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {what} is an object with "
                          f"{', '.join(repr(k) for k in keys)}, not a {type_name(value)}")
    for key in value:
        if key not in keys:
            raise ConfigError(f"{source}: unknown {key_kind} {key!r}",
                              hint=suggest(str(key), keys) or f"valid keys: {', '.join(keys)}")


def _check_name(name: str, source: str) -> None:
    if not name or name != name.strip() or any(c in name for c in "${}<>()"):
        raise ConfigError(f"{source}: invalid parameter name {name!r}")


def _split_assignment(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"{CLI_SOURCE}: {flag} {text!r} is not NAME=VALUE")
    return name.strip(), value


def _json_or_raw(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _parse_definition(name: str, value: dict[str, Any], source: str) -> ParamDef:
    where = f"{source}: parameter {name!r}"
    for key in value:
        if key not in DEFINITION_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} in its definition",
                              hint=suggest(str(key), DEFINITION_KEYS)
                              or "a definition has val, type, desc, choices and regex; "
                                 "to give an object as a value, write {val: {...}}")
    declared = value.get("type")
    if declared is not None and declared not in TYPES:
        raise ConfigError(f"{where}: unknown type {declared!r}",
                          hint=suggest(str(declared), TYPES) or f"types: {', '.join(TYPES)}")
    choices = value.get("choices", value.get("val_domain"))
    if choices is not None and not isinstance(choices, list):
        raise ConfigError(f"{where}: 'choices' must be a list")
    pattern = value.get("regex", value.get("val_regex"))
    regex = None
    if pattern is not None:
        try:
            regex = re.compile(str(pattern))
        except re.error as error:
            raise ConfigError(f"{where}: invalid regex {pattern!r}: {error}") from None
    desc = value.get("desc", "")
    if isinstance(desc, list):  # DLBS wrote long descriptions as lists of lines
        desc = " ".join(str(line) for line in desc)
    outside_id = bool(value.get("host", False)) or value.get("identity", True) is False
    return ParamDef(name, value["val"], source, declared, str(desc), choices, regex, outside_id)
