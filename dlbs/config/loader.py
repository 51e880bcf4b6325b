"""Read spec files (JSON or YAML 1.2), follow includes and merge layers into one Spec.

Layer order (docs/language.md section 1): the default configs in `configs/` (sorted by file
name), then each file's includes, then the file itself, then `-P/-V/-E` from the CLI.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dlbs.config.documents import (
    DUPLICATE_KEY,
    check_document,
    check_suffix,
    parse_document,
    parse_json,
    read_spec_bytes,
    unique_keys,
)
from dlbs.config.limits import MAX_SPEC_BYTES, MAX_SPEC_FILES, MAX_SPEC_TOTAL_BYTES
from dlbs.config.names import check_name
from dlbs.config.parsed_cache import ParsedCache, digest
from dlbs.config.patterns import check_pattern, compile_pattern
from dlbs.config.spec import DEFINITION_KEYS, Axis, Extension, ParamDef, Spec
from dlbs.config.values import TYPES, check_plain, short, type_name
from dlbs.errors import ConfigError

TOP_LEVEL_KEYS = ("parameters", "variables", "extensions", "include")
EXTENSION_KEYS = ("condition", "parameters", "cases", "error")
CLI_SOURCE = "<command line>"
# Definition keys a redefinition keeps when it does not give them, and their ParamDef fields.
_KEPT_FIELDS = (("type", "type"), ("desc", "desc"), ("choices", "choices"), ("regex", "regex"),
                ("min", "minimum"), ("max", "maximum"))


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
    """A 'did you mean' hint naming the closest candidates (each once), or None."""
    import difflib  # here: only an error needs it, and `dlbs plan` starts faster

    close = difflib.get_close_matches(word, list(dict.fromkeys(candidates)), n=n, cutoff=0.6)
    if not close:
        return None
    return "did you mean " + " or ".join(repr(c) for c in close) + "?"


class SpecBuilder:
    """Accumulates layers into a Spec, in the order they are added."""

    def __init__(self) -> None:
        self.spec = Spec()
        self.files_read = 0
        self.bytes_left = MAX_SPEC_TOTAL_BYTES

    # -- files -----------------------------------------------------------------------------
    def add_file(self, path: str | Path, _stack: tuple[Path, ...] = (), *,
                 default_config: bool = False, parsed: ParsedCache | None = None) -> None:
        """Add a spec file and its includes (`default_config`: see parse_document).

        `parsed`: the cache of parsed default configs (dlbs/config/parsed_cache.py), for a
        default config only; its includes, like every other file, are parsed each time.
        """
        path = Path(path)
        if "\x00" in str(path):
            raise ConfigError(f"{_stack[-1] if _stack else path}: a file name holds a NUL byte")
        try:
            real = path.resolve()
        except (OSError, RuntimeError) as error:
            raise ConfigError(f"{path}: cannot read: {error}") from None
        if real in _stack:
            chain = " -> ".join(str(p) for p in (*_stack, real))
            raise ConfigError(f"include cycle: {chain}")
        self.files_read += 1
        if self.files_read > MAX_SPEC_FILES:
            raise ConfigError(f"{path}: a spec may read at most {MAX_SPEC_FILES} files, its "
                              f"includes (and theirs) counted each time they are included",
                              hint="docs/security.md lists the budgets of specs")
        check_suffix(path)  # before anything is opened: `include: [/dev/zero]` reads nothing
        data = read_spec_bytes(path, MAX_SPEC_BYTES)
        self.bytes_left -= len(data)
        if self.bytes_left < 0:
            raise ConfigError(f"{path}: the files of this spec add up to more than "
                              f"{MAX_SPEC_TOTAL_BYTES / 2**20:g} MiB",
                              hint="docs/security.md lists the budgets of specs")
        document = self._parse(path, data, default_config, parsed)
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

    @staticmethod
    def _parse(path: Path, data: bytes, default_config: bool,
               parsed: ParsedCache | None) -> Any:
        key = digest(path.suffix, data) if parsed is not None else ""
        document = parsed.get(key) if parsed is not None else None
        if document is not None:  # it passed check_document when it was parsed
            return document
        document = parse_document(path, data, default_config)
        if document is None:
            document = {}
        if parsed is not None and isinstance(document, dict):
            parsed.put(key, document)
        return document

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
                for key, attribute in _KEPT_FIELDS:
                    if key in value or (key == "choices" and "val_domain" in value) or (
                            key == "regex" and "val_regex" in value):
                        continue
                    setattr(definition, attribute, getattr(current, attribute))
                definition.host = definition.host or current.host
                if "identity" not in value:
                    definition.when_set = current.when_set
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
                    check_pattern(test)
                except ConfigError as error:
                    raise ConfigError(f"{source}: condition on {name!r}: {error.message}") \
                        from None
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
            error = " ".join(error.split())  # printed as one line
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
            where = f"{CLI_SOURCE}: -E #{index + 1}"
            try:
                extension = json.loads(text, parse_constant=_no_constant,
                                       object_pairs_hook=unique_keys)
            except json.JSONDecodeError as error:
                raise ConfigError(f"{where} is not JSON: {error.msg} (column {error.colno})") \
                    from None
            except (RecursionError, ValueError):
                extension = parse_json(text, where)  # says why, in one line
            check_document(extension, where)
            self.add_extension(extension, f"{CLI_SOURCE}: -E #{index + 1}")


def load_spec(config: str | Path | None = None, *, defaults: bool = True,
              params: Sequence[str] = (), variables: Sequence[str] = (),
              extensions: Sequence[str] = ()) -> Spec:
    """Merge the default configs, `config` (with its includes) and the CLI overrides."""
    builder = SpecBuilder()
    if defaults:
        parsed = ParsedCache()
        for path in default_config_files():
            builder.add_file(path, default_config=True, parsed=parsed)
        parsed.save()
        builder.spec.own_namespaces = frozenset(
            name.partition(".")[0] for name, definition in builder.spec.params.items()
            if definition.type is not None)
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
            raise ConfigError(f"{source}: unknown {key_kind} {short(key)}",
                              hint=suggest(str(key), keys) or f"valid keys: {', '.join(keys)}")


def _check_name(name: str, source: str) -> None:
    check_name(name, source)


def _split_assignment(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"{CLI_SOURCE}: {flag} {text!r} is not NAME=VALUE")
    return name.strip(), value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _json_or_raw(text: str) -> Any:
    """-P/-V values: JSON when the text is JSON, else the text itself."""
    try:
        value = parse_json(text, CLI_SOURCE)
    except ConfigError as error:
        if "nested more than" in error.message or DUPLICATE_KEY in error.message:
            raise
        return text
    check_document(value, CLI_SOURCE)
    return value


def _parse_definition(name: str, value: dict[str, Any], source: str) -> ParamDef:
    where = f"{source}: parameter {name!r}"
    for key in value:
        if key not in DEFINITION_KEYS:
            raise ConfigError(f"{where}: unknown key {short(key)} in its definition",
                              hint=suggest(str(key), DEFINITION_KEYS)
                              or "a definition has val, type, desc, choices, regex, min and max; "
                                 "to give an object as a value, write {val: {...}}")
    declared = value.get("type")
    if declared is not None and declared not in TYPES:
        raise ConfigError(f"{where}: unknown type {short(declared)}",
                          hint=suggest(str(declared), TYPES) or f"types: {', '.join(TYPES)}")
    choices = value.get("choices", value.get("val_domain"))
    if choices is not None and not isinstance(choices, list):
        raise ConfigError(f"{where}: 'choices' must be a list")
    pattern = value.get("regex", value.get("val_regex"))
    regex = None
    if pattern is not None:
        try:
            regex = compile_pattern(str(pattern))
        except ConfigError as error:
            reason = error.message.removeprefix("invalid regular expression ")
            raise ConfigError(f"{where}: invalid regex {reason}") from None
    minimum, maximum = _bound(value, "min", where), _bound(value, "max", where)
    if (minimum is not None or maximum is not None) and declared not in ("int", "float"):
        raise ConfigError(f"{where}: min and max bound numbers: declare type int or float")
    if minimum is not None and maximum is not None and minimum > maximum:
        raise ConfigError(f"{where}: min {minimum} is above max {maximum}")
    desc = value.get("desc", "")
    if isinstance(desc, list):  # DLBS wrote long descriptions as lists of lines
        desc = " ".join(str(line) for line in desc)
    identity = value.get("identity", True)
    if identity is not True and identity is not False and identity != "when_set":
        raise ConfigError(f"{where}: identity must be true, false or when_set, not "
                          f"{short(identity)}")
    outside_id = bool(value.get("host", False)) or identity is False
    return ParamDef(name, value["val"], source, declared, str(desc), choices, regex, outside_id,
                    minimum, maximum, when_set=identity == "when_set")


def _bound(definition: dict[str, Any], key: str, where: str) -> int | float | None:
    """A definition's `min` or `max`: a finite number that a plan can hold, or None."""
    bound = definition.get(key)
    if bound is None:
        return None
    if isinstance(bound, bool) or not isinstance(bound, int | float) or \
            isinstance(bound, float) and not math.isfinite(bound):
        raise ConfigError(f"{where}: {key} must be a number, not {short(bound)}")
    try:
        check_plain(bound)
    except ConfigError as error:
        raise ConfigError(f"{where}: {key}: {error.message}") from None
    return bound
