"""The cache of parsed default configs (dlbs/config/parsed_cache.py).

A hit gives what parsing gives; a changed config misses; a corrupt, foreign or unwritable
cache is ignored (the configs are parsed); a link at the cache's path is never written
through; a user's spec is never cached.
"""

from __future__ import annotations

import hashlib
import shutil
import tracemalloc
from pathlib import Path

import orjson
import pytest

from dlbs.config import loader, parsed_cache
from dlbs.config.loader import load_spec
from dlbs.config.parsed_cache import MAGIC, ParsedCache, digest, sealed, unsealed
from dlbs.plan.builder import Planner

REPO = Path(__file__).resolve().parents[2]
ENV = {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root"}


@pytest.fixture
def configs(tmp_path, monkeypatch):
    """A copy of the default configs, and a cache of its own beside it."""
    folder = tmp_path / "configs"
    shutil.copytree(REPO / "configs", folder)
    monkeypatch.setenv("DLBS_CONFIGS", str(folder))
    cache = tmp_path / "pycache" / "default-configs.test.marshal"
    monkeypatch.setattr(parsed_cache, "cache_path", lambda: cache)
    return folder, cache


def plan(**kwargs) -> list[dict]:
    return list(Planner(load_spec(**kwargs), ENV).experiments())


def _no_parsing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a default config was parsed")

    monkeypatch.setattr(loader, "parse_document", refuse)


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def _loaded(cache: Path) -> list:
    payload = unsealed(cache.read_bytes())
    assert payload is not None
    return orjson.loads(payload)


def _entries(cache: Path) -> dict:
    return _loaded(cache)[2]


def test_a_hit_gives_what_parsing_gives_without_parsing(configs, monkeypatch):
    _, cache = configs
    parsed = plan()
    assert cache.is_file()
    _no_parsing(monkeypatch)
    assert plan() == parsed


def test_the_cached_documents_are_the_parsed_ones(configs):
    folder, cache = configs
    load_spec()
    entries = _entries(cache)
    files = loader.default_config_files()
    assert len(entries) == len(files)
    for path in files:
        data = path.read_bytes()
        assert repr(entries[digest(path.suffix, data)]) == repr(
            loader.parse_document(path, data, default_config=True)
        )


def test_a_changed_config_misses_and_is_parsed_again(configs, monkeypatch):
    folder, cache = configs
    assert plan(params=["exp.model=resnet50"])[0]["exp.num_batches"] != 7
    base = folder / "00-base.yaml"
    text = base.read_text()
    assert "  exp.num_batches:\n    val: " in text
    start = text.index("  exp.num_batches:\n    val: ") + len("  exp.num_batches:\n    val: ")
    end = text.index("\n", start)
    base.write_text(text[:start] + "7" + text[end:])
    (experiment,) = plan(params=["exp.model=resnet50"])
    assert experiment["exp.num_batches"] == 7
    assert digest(".yaml", base.read_bytes()) in _entries(cache)
    _no_parsing(monkeypatch)
    assert plan(params=["exp.model=resnet50"])[0]["exp.num_batches"] == 7


def test_a_corrupt_cache_is_ignored_and_written_again(configs):
    _, cache = configs
    parsed = plan()
    for garbage in (
        b"",
        b"not a cache",
        MAGIC + b"\x00\x01garbage",
        MAGIC,
        cache.read_bytes()[:-20],
        cache.read_bytes()[:-1] + b"]",                 # one byte changed: the digest differs
        sealed(b"[2, [], {\"a\": 1"),                    # sealed, but no JSON
        sealed(b"[2, [], []]"),                          # sealed JSON of the wrong shape
    ):
        cache.write_bytes(garbage)
        assert plan() == parsed
        assert cache.read_bytes().startswith(MAGIC) and _entries(cache)


@pytest.mark.parametrize(
    "foreign",
    [
        lambda entries: {key: (1, 2) for key in entries},  # a tuple is not a document
        lambda entries: [1, 2],  # not a mapping of digests
        lambda entries: {key: "text" for key in entries},  # a document that is not an object
        # Past the budgets that parsing keeps: nesting, and the number of values.
        lambda entries: {key: {"parameters": _nested(70)} for key in entries},
        lambda entries: {key: {"parameters": {"a": [["x"] * 1100] * 1000}} for key in entries},
    ],
)
def test_a_cache_holding_more_than_plain_data_is_ignored(configs, foreign):
    _, cache = configs
    parsed = plan()
    format_, stamp, entries = _loaded(cache)
    cache.write_bytes(sealed(orjson.dumps([format_, stamp, foreign(entries)])))
    assert plan() == parsed


@pytest.mark.parametrize("claim", [
    # Issue 34 item 10: what marshal's format let 25 bytes claim (a tuple of 100 M items).
    MAGIC + b")\x00\xe1\xf5\x05",
    MAGIC + b"(\x00\xe1\xf5\x05" + b"N" * 4,
    # The same sealed with a valid digest (a writer can compute one): no length is read.
    sealed(b")\x00\xe1\xf5\x05"),
    sealed(b"[" * 100_000),
    sealed(b"\"" + b"x" * 1000),
])
def test_a_cache_that_claims_a_size_allocates_nothing_of_it(configs, claim):
    _, cache = configs
    parsed = plan()
    cache.write_bytes(claim)
    tracemalloc.start()
    try:
        assert plan() == parsed
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20
    assert _entries(cache)  # dropped, and written again whole


def test_the_digest_is_checked_before_the_payload_is_read(configs, monkeypatch):
    _, cache = configs
    plan()
    data = cache.read_bytes()
    payload = unsealed(data)
    assert payload is not None
    assert data[len(MAGIC):len(MAGIC) + 64] == hashlib.sha256(payload).hexdigest().encode()
    cache.write_bytes(data[:len(MAGIC)] + b"0" * 64 + data[len(MAGIC) + 64:])
    parsed_payloads = []
    original = orjson.loads
    monkeypatch.setattr(parsed_cache.orjson, "loads",
                        lambda text: parsed_payloads.append(text) or original(text))
    assert unsealed(cache.read_bytes()) is None
    ParsedCache(cache).get("anything")
    assert parsed_payloads == []


def test_a_cache_of_another_parser_is_ignored(configs, monkeypatch):
    _, cache = configs
    parsed = plan()
    format_, stamp, entries = _loaded(cache)
    wrong = {key: {"parameters": {"exp.model": {"val": "wrong"}}} for key in entries}
    for other in ((format_ + 1, stamp), (format_, [*stamp[:1], "another parser", *stamp[2:]])):
        cache.write_bytes(sealed(orjson.dumps([*other, wrong])))
        assert plan() == parsed


def test_an_unwritable_cache_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("DLBS_CONFIGS", str(REPO / "configs"))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # Its folder cannot be made (a file is in the way), whoever runs the test (root too).
    monkeypatch.setattr(parsed_cache, "cache_path", lambda: blocker / "cache.json")
    assert plan()
    assert blocker.read_text() == ""


def test_a_read_only_folder_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("DLBS_CONFIGS", str(REPO / "configs"))
    cache = tmp_path / "cache.json"
    monkeypatch.setattr(parsed_cache, "cache_path", lambda: cache)

    def fail(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(parsed_cache.os, "replace", fail)
    assert plan()
    assert not cache.exists()
    assert [path.name for path in tmp_path.iterdir()] == []  # no temporary file left


def test_a_link_at_the_cache_path_is_not_written_through(configs):
    _, cache = configs
    cache.parent.mkdir()
    target = cache.parent / "target"
    target.write_bytes(b"precious")
    cache.symlink_to(target)
    assert plan()
    assert cache.is_symlink() and target.read_bytes() == b"precious"


def test_a_link_to_a_cache_is_not_read(configs, monkeypatch):
    _, cache = configs
    plan()
    real = cache.with_name("elsewhere")
    cache.rename(real)
    cache.symlink_to(real)
    calls = []
    original = loader.parse_document
    monkeypatch.setattr(
        loader,
        "parse_document",
        lambda *args, **kwargs: calls.append(args) or original(*args, **kwargs),
    )
    assert plan()
    assert calls  # parsed: the link was not followed


def test_a_folder_at_the_cache_path_is_left_alone(configs):
    _, cache = configs
    cache.mkdir(parents=True)
    assert plan()
    assert cache.is_dir()


def test_a_users_spec_and_its_includes_are_never_cached(configs, tmp_path):
    _, cache = configs
    included = tmp_path / "included.yaml"
    included.write_text("parameters:\n  exp.model: vgg16\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"include: [{included}]\nparameters:\n  exp.replica_batch: 3\n")
    (experiment,) = plan(config=spec)
    assert experiment["exp.model"] == "vgg16" and experiment["exp.replica_batch"] == 3
    keys = set(_entries(cache))
    assert digest(".yaml", spec.read_bytes()) not in keys
    assert digest(".yaml", included.read_bytes()) not in keys
    # A spec changed in place is read anew, not served from anywhere.
    included.write_text("parameters:\n  exp.model: vgg11\n")
    assert plan(config=spec)[0]["exp.model"] == "vgg11"


def test_it_is_written_even_where_bytecode_is_not(configs, monkeypatch):
    _, cache = configs
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setattr("sys.dont_write_bytecode", True)
    plan()
    assert cache.is_file()


@pytest.mark.parametrize("value", [object(), float("nan"), float("inf"), 2**70, (1, 2)])
def test_a_document_that_json_cannot_hold_exactly_is_not_cached(tmp_path, value):
    cache = ParsedCache(tmp_path / "cache.json")
    cache.put("key", {"parameters": {"when": value}})
    cache.save()
    assert not (tmp_path / "cache.json").exists()


def test_the_default_cache_lives_beside_the_bytecode():
    path = parsed_cache.cache_path()
    assert path.parent == Path(parsed_cache.__file__).parent / "__pycache__"
    assert path.name.startswith("default-configs.") and path.suffix == ".json"
