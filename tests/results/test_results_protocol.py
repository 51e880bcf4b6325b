"""The log protocol parser: golden logs, launcher prefixes, status judgement, streaming."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from helpers_results import DATA
from hypothesis import given, settings
from hypothesis import strategies as st

from dlbs.errors import ResultsError
from dlbs.results.protocol import (
    ProtocolParser,
    experiment_from_log,
    judge_status,
    parse_lines,
    parse_log,
    protocol_line,
)

GOLDEN = sorted(DATA.glob("*.expected.json"))


def _comparable(values: dict[str, Any]) -> dict[str, Any]:
    # NaN != NaN, so golden NaNs are compared by name.
    return {key: "NaN" if isinstance(value, float) and math.isnan(value) else value
            for key, value in values.items()}


def test_golden_logs_exist() -> None:
    names = {path.name.removesuffix(".expected.json") for path in GOLDEN}
    assert {"dlbs_pytorch_resnet50", "dlbs_era_tensorflow_ok", "dlbs_era_caffe2_failed",
            "launcher_prefixes", "garbage"} <= names


@pytest.mark.parametrize("expected_path", GOLDEN, ids=lambda path: path.name)
def test_golden_log_parses_to_expected(expected_path: Path) -> None:
    log = expected_path.with_name(expected_path.name.replace(".expected.json", ".log"))
    expected = json.loads(expected_path.read_text())
    parsed = parse_log(log)
    assert (parsed.lines, parsed.matched, parsed.unparsable) == (
        expected["lines"], expected["matched"], expected["unparsable"])
    want = {key: str(log) if value == "@LOG@" else value
            for key, value in expected["experiment"].items()}
    assert _comparable(experiment_from_log(parsed)) == _comparable(want)


@pytest.mark.parametrize("expected_path", GOLDEN, ids=lambda path: path.name)
def test_text_lines_parse_like_bytes(expected_path: Path) -> None:
    log = expected_path.with_name(expected_path.name.replace(".expected.json", ".log"))
    from_bytes = parse_log(log)
    text = log.read_bytes().decode("utf-8", errors="surrogateescape")
    from_text = parse_lines(text.splitlines(keepends=True))
    # Text decoding may turn a non-UTF-8 value into a (surrogate) string, so compare keys.
    assert set(from_text.values) >= set(from_bytes.values)
    assert from_text.lines == from_bytes.lines


@pytest.mark.parametrize(("line", "key", "value"), [
    ('__exp.model__="resnet50"', "exp.model", "resnet50"),
    ('   __a.b__=1', "a.b", 1),
    ('\t__a.b__=[1, 2]', "a.b", [1, 2]),
    ('0: __results.time__=2.5', "results.time", 2.5),
    ('12:__results.time__=2.5', "results.time", 2.5),
    ('[default0]:__results.time__=2.5', "results.time", 2.5),
    ('[default3]: __results.time__=2.5', "results.time", 2.5),
    ('[1,0]<stdout>:__results.time__=2.5', "results.time", 2.5),
    ('[rank0]:__results.time__=2.5', "results.time", 2.5),
    ('__runtime.env.CUDA_VISIBLE_DEVICES__="0,1"', "runtime.env.CUDA_VISIBLE_DEVICES", "0,1"),
    ('__results.use.gpu-mem__=[1]', "results.use.gpu-mem", [1]),
    ('__a__={"b": {"c": null}}', "a", {"b": {"c": None}}),
    ('__a__= true ', "a", True),
    ('__a__="x__=y"', "a", "x__=y"),
])
def test_protocol_lines(line: str, key: str, value: Any) -> None:
    for form in (line, line + "\n", line + "\r\n", (line + "\n").encode()):
        assert parse_lines([form]).values == {key: value}


@pytest.mark.parametrize("line", [
    "plain output",
    "x __a__=1",
    "node1: __a__=1",
    "[default0] __a__=1",
    "__a b__=1",
    "__a__ =1",
    "_a__=1",
    "____=1",
    "",
])
def test_lines_that_are_not_protocol(line: str) -> None:
    parsed = parse_lines([line])
    assert parsed.values == {} and parsed.matched == 0 and parsed.unparsable == 0


@pytest.mark.parametrize("line", ["__a__=", "__a__=nope", "__a__=[1,", '__a__="open'])
def test_unparsable_values_are_counted_not_kept(line: str) -> None:
    parsed = parse_lines(["__a__=1", line])
    assert parsed.values == {"a": 1}
    assert (parsed.matched, parsed.unparsable) == (1, 1)


@pytest.mark.parametrize(("line", "values"), [
    ("100%|##########| 10/10 [00:01<00:00]\r__results.time__=12.5\n", {"results.time": 12.5}),
    ("__a__=1\r__b__=2\r\n", {"a": 1, "b": 2}),
    ("[default0]:50%|#####\r[default0]:__a__=[1]\n", {"a": [1]}),
    ("__a__=1\rprogress 10%\n", {"a": 1}),
])
def test_progress_bar_carriage_returns(line: str, values: dict[str, Any]) -> None:
    assert parse_lines([line]).values == values
    assert parse_lines([line.encode()]).values == values


def test_last_occurrence_wins_across_feeds() -> None:
    parser = ProtocolParser()
    parser.feed("__results.time__=1.0\n")
    parser.feed_lines([b"noise\n", b"0: __results.time__=2.0\n"])
    parser.feed("[default0]:__results.time__=3.0")
    assert parser.result.values == {"results.time": 3.0}
    assert (parser.result.lines, parser.result.matched) == (4, 3)


@pytest.mark.parametrize(("values", "status"), [
    ({"results.time": 12.5}, "ok"),
    ({"results.time": 1}, "ok"),
    ({"results.time": 0}, "failure"),
    ({"results.time": -1}, "failure"),
    ({"results.time": True}, "failure"),
    ({"results.time": "12"}, "failure"),
    ({"results.time": float("nan")}, "failure"),
    ({"results.time": float("inf")}, "failure"),
    ({}, "failure"),
    ({"results.time": 12.5, "results.status": "failure"}, "failure"),
    ({"results.status": "ok"}, "ok"),
    ({"results.status": "timeout"}, "timeout"),
])
def test_status_is_judged_as_dlbs_did(values: dict[str, Any], status: str) -> None:
    judged = judge_status(values)
    assert judged["results.status"] == status
    if "results.status" not in values and status == "failure":
        assert "results.time" in judged["results.status_msg"]
    assert "results.status" not in values or judged == values


def test_judged_status_keeps_the_backend_reason() -> None:
    judged = judge_status({"results.status_msg": "CUDA out of memory"})
    assert judged == {"results.status": "failure", "results.status_msg": "CUDA out of memory"}


def test_missing_log_is_a_results_error(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match=r"cannot read log .*missing\.log"):
        parse_log(tmp_path / "missing.log")


def test_large_log_streams(tmp_path: Path) -> None:
    # 200,000 lines of chatter around a few protocol lines: parsed without holding the file.
    log = tmp_path / "big.log"
    chatter = b"step 17: loss 6.9077 images/sec 1234.5 __ not a key\n" * 1000
    with log.open("wb") as stream:
        stream.write(b'__exp.model__="resnet50"\n')
        for index in range(200):
            stream.write(chatter)
            stream.write(f"0: __results.time__={index + 1}\n".encode())
    parsed = parse_log(log)
    assert parsed.values == {"exp.model": "resnet50", "results.time": 200}
    assert parsed.lines == 1 + 200 * 1001
    assert parsed.matched == 201


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(key=st.from_regex(r"[A-Za-z0-9_.\-]+", fullmatch=True), value=_JSON,
       prefix=st.sampled_from(["", "  ", "0: ", "[default0]:", "[1,0]<stdout>:"]))
def test_written_lines_read_back(key: str, value: Any, prefix: str) -> None:
    line = prefix + protocol_line(key, value) + "\n"
    assert parse_lines([line]).values == {key: value}
    assert parse_lines([line.encode()]).values == {key: value}


@pytest.mark.parametrize("key", ["", "a b", "a=b", "ä", "a\nb"])
def test_protocol_line_refuses_bad_keys(key: str) -> None:
    with pytest.raises(ValueError, match="cannot be a protocol key"):
        protocol_line(key, 1)
