"""Property-based tests of the expander.

Random specs never crash with anything but ConfigError; escaping and rendering round-trip.
"""

from __future__ import annotations

import json
import string

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dlbs.config.template import escape, parse
from dlbs.config.values import cast, render, split_words
from dlbs.errors import ConfigError
from tests.unit.planning import plan_doc

NAMES = st.sampled_from(["a", "b", "c", "x.y", "x.z", "n"])
# Text made of the characters that matter to the grammar, plus some plain ones.
FRAGMENTS = st.text(alphabet="${}<>()'ab.x,:0 1\\\"", max_size=30)
# Any text a value may hold: everything but NUL and lone surrogates (section 6).
VALUE_TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
TEMPLATES = st.one_of(
    FRAGMENTS,
    st.builds(lambda n: "${" + n + "}", NAMES),
    st.builds(lambda n: "$<" + n + ">", NAMES),
    st.builds(lambda n, m: "${${" + n + "}." + m + "}", NAMES, NAMES),
    st.builds(lambda n: "$(len('${" + n + "}'))$", NAMES),
    st.builds(lambda a, b: a + "${" + b + "}", FRAGMENTS, NAMES),
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-2, 2),
                    TEMPLATES)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("pq"), inner, max_size=2)),
    max_leaves=6)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(params=st.dictionaries(NAMES, VALUES, max_size=6),
       variables=st.dictionaries(NAMES, st.lists(SCALARS, max_size=3), max_size=2),
       conditions=st.lists(st.tuples(NAMES, st.one_of(st.sampled_from([".*", "a", "(.)"]),
                                                      st.integers(0, 2))), max_size=2))
def test_random_specs_plan_or_raise_config_error(params, variables, conditions):
    spec = {"parameters": params, "variables": variables,
            "extensions": [{"condition": {name: test}, "parameters": {"n": "${a}"}}
                           for name, test in conditions]}
    try:
        experiments = plan_doc(spec, env={"HOME": "/h"})
    except ConfigError as error:
        assert str(error) and "\n" not in str(error)
        return
    for experiment in experiments:
        json.dumps(experiment)  # plain data, ready to write
        assert not [k for k in experiment if k.startswith("__")]


@given(st.text(VALUE_TEXT, max_size=40))
def test_escape_round_trips(text):
    (experiment,) = plan_doc({"parameters": {"a": escape(text)}})
    assert experiment["a"] == text


@given(st.text(alphabet=string.printable.replace("$", ""), max_size=40))
def test_text_without_dollar_is_literal(text):
    assert parse(text).is_literal
    assert "".join(parse(text).parts) == text


@given(st.text(VALUE_TEXT, max_size=20), st.text(VALUE_TEXT, max_size=20))
def test_reference_renders_value_inside_text(prefix, value):
    # A literal `$` right before `${` is the escape `$${`: such text needs `$('$')$`.
    assume(not prefix.endswith("$"))
    spec = {"parameters": {"v": escape(value), "s": escape(prefix) + "${v}"}}
    (experiment,) = plan_doc(spec)
    assert experiment["s"] == prefix + value


@given(st.lists(st.text(min_size=1, max_size=10), max_size=5))
def test_list_words_round_trip_through_the_shell(words):
    import shlex

    joined = " ".join(shlex.quote(w) for w in words)
    assert [shlex.split(w)[0] if shlex.split(w) else "" for w in split_words(joined)] == words


@given(st.one_of(st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False)))
def test_rendered_scalars_cast_back(value):
    declared = {bool: "bool", int: "int", float: "float"}[type(value)]
    assert cast(render(value), declared) == value


@given(st.text(VALUE_TEXT, max_size=20))
def test_substituted_strings_stay_one_argument(value):
    import shlex

    spec = {"parameters": {"v": escape(value), "args": ["--v ${v}", "${v}"]}}
    (experiment,) = plan_doc(spec)
    words = [shlex.split(item) for item in experiment["args"]]
    if value:
        assert words == [["--v", value], [value]]
