"""docs/language.md, rule by rule: each row is a spec and the plan it must give."""

from __future__ import annotations

from typing import Any

import pytest

from dlbs.errors import ConfigError
from tests.unit.planning import plan_doc


def P(**params: Any) -> dict[str, Any]:
    return {"parameters": params}


# (id, spec, env, expected plan: a list of the experiments, each compared key by key)
RESOLVES = [
    # Worked examples: docs/language.md section 10.
    ("worked-refs", P(a="x", b="${a}-y", c="$<b>/${a}"), {},
     [{"a": "x", "b": "x-y", "c": "x-y/x"}]),
    ("worked-product", {"variables": {"v1": [1, 2], "v2": ["a", "b"]}}, {},
     [{"v1": 1, "v2": "a"}, {"v1": 1, "v2": "b"}, {"v1": 2, "v2": "a"}, {"v1": 2, "v2": "b"}]),
    ("worked-len", P(g="0,1,2", n="$(len('${g}'.split(',')))$"), {},
     [{"g": "0,1,2", "n": 3}]),
    ("worked-nested", {"parameters": {"fw": "pytorch", "img": "${${fw}.image}",
                                      "pytorch.image": "pt:1"}}, {},
     [{"fw": "pytorch", "img": "pt:1", "pytorch.image": "pt:1"}]),
    ("worked-bool-text", P(d=True, s="--flag ${d}"), {}, [{"d": True, "s": "--flag true"}]),
    # Section 4: references.
    ("angle-form", P(a=1, b="$<a>"), {}, [{"a": 1, "b": 1}]),
    ("exact-ref-keeps-type", P(a=[1, 2], b="${a}", c={"k": 1}, d="${c}", e=2.5, f="${e}"), {},
     [{"b": [1, 2], "d": {"k": 1}, "f": 2.5}]),
    ("render-null-empty", P(a=None, b="[${a}]"), {}, [{"b": "[]"}]),
    ("render-false", P(a=False, b="${a}!"), {}, [{"b": "false!"}]),
    ("render-numbers", P(a=3, f=0.001, b="${a}/${f}"), {}, [{"b": "3/0.001"}]),
    ("render-list", P(a=["x", 1, True], b="<${a}>"), {}, [{"b": "<x 1 true>"}]),
    ("render-dict", P(a={"k": [1, None]}, b="=${a}"), {}, [{"b": '={"k":[1,null]}'}]),
    ("env-fallback", P(h="${HOME}/x"), {"HOME": "/home/u"}, [{"h": "/home/u/x"}]),
    ("param-wins-over-env", P(HOME="/p", h="${HOME}"), {"HOME": "/e"}, [{"h": "/p"}]),
    ("escape-brace", P(a="$${a} $$<b> $$(c"), {}, [{"a": "${a} $<b> $(c"}]),
    ("shell-dollar-untouched", P(a="echo $HOME $1 $"), {}, [{"a": "echo $HOME $1 $"}]),
    ("innermost-first", P(i=1, n1="one", v="${n${i}}"), {}, [{"v": "one"}]),
    # Section 5: expressions.
    ("expr-keeps-type", P(a="$(2 * 3)$", b="$(2 / 4)$", c="$([1, 2])$", d="$(3 > 2)$"), {},
     [{"a": 6, "b": 0.5, "c": [1, 2], "d": True}]),
    ("expr-in-text", P(a="n=$(1 + 1)$!"), {}, [{"a": "n=2!"}]),
    ("expr-null-renders-null", P(a=None, b="$(${a} is None)$"), {}, [{"b": True}]),
    ("expr-bool-names", P(a=True, b="$(not ${a})$", c="$(true and not false)$"), {},
     [{"b": False, "c": True}]),
    ("expr-strings-as-they-are", P(m="resnet50", b="$('${m}'.upper())$"), {},
     [{"b": "RESNET50"}]),
    ("expr-not-rescanned", P(a="$('$' + '{b}')$"), {}, [{"a": "${b}"}]),
    ("expr-escape", P(a="$$(1+1)$"), {}, [{"a": "$(1+1)$"}]),
    ("expr-whitelist", P(a="$(sorted([3, 1])[0] + max(1, 2) + abs(-1) + round(1.4) + sum([1]))$",
                         b="$(re.sub('[:]', ',', '0:1'))$", c="$(math.ceil(1.2))$",
                         d="$(os.path.basename('/a/b.txt'))$",
                         e="$([x * 2 for x in range(3)])$", f="$(any([0, 1]) and all([1]))$",
                         g="$(int('7') + int(float('2.5')))$", h="$(dict(a=1))$",
                         i="$(list('ab'))$", j="$(bool(0) or str(1))$",
                         k="$(min(len('abc'), 9))$", l="$('a,b'.split(','))$"), {},
     [{"a": 6, "b": "0,1", "c": 2, "d": "b.txt", "e": [0, 2, 4], "f": True, "g": 9,
       "h": {"a": 1}, "i": ["a", "b"], "j": "1", "k": 3, "l": ["a", "b"]}]),
    ("expr-conditional", P(g="", d="$('gpu' if '${g}' else 'cpu')$"), {}, [{"d": "cpu"}]),
    # Section 6: types and lists.
    ("cast-int", {"parameters": {"a": {"val": "200", "type": "int"}}}, {}, [{"a": 200}]),
    ("cast-float-from-int", {"parameters": {"a": {"val": 1, "type": "float"}}}, {},
     [{"a": 1.0}]),
    ("cast-bool-words", {"parameters": {f"b{i}": {"val": w, "type": "bool"} for i, w in
                                        enumerate(["true", "yes", "on", "1", "false", "no",
                                                   "off", "0", "ON"])}}, {},
     [{"b0": True, "b1": True, "b2": True, "b3": True, "b4": False, "b5": False, "b6": False,
       "b7": False, "b8": True}]),
    ("cast-str", {"parameters": {"a": {"val": 5, "type": "str"}}}, {}, [{"a": "5"}]),
    ("cast-dict-from-json", {"parameters": {"a": {"val": '{"k": 1}', "type": "dict"}}}, {},
     [{"a": {"k": 1}}]),
    ("null-stays-null", {"parameters": {"a": {"val": None, "type": "int"}}}, {}, [{"a": None}]),
    ("list-from-shell-string", {"parameters": {"a": {"val": "--rm --ipc=host -v '/a b:/c'",
                                                     "type": "list"}}}, {},
     [{"a": ["--rm", "--ipc=host", "-v", "'/a b:/c'"]}]),
    ("list-stays-list-empty-dropped",
     P(x="", n=None, args=["--a 1", "${x}", "$('' if True else '--b')$", "", "${n}", "--c", 0]),
     {}, [{"args": ["--a 1", "--c", 0]}]),
    ("list-quotes-substituted-strings", P(p="/my data", args=["--dir ${p}", "${p}"]), {},
     [{"args": ["--dir '/my data'", "'/my data'"]}]),
    ("list-splices-list", P(extra=["-a", "-b 1"], args=["--x", "${extra}", "--y"]), {},
     [{"args": ["--x", "-a", "-b 1", "--y"]}]),
    ("list-string-with-refs-for-declared-list",
     {"parameters": {"p": "/my data", "a": {"val": "--dir ${p} --n 1", "type": "list"}}}, {},
     [{"a": ["--dir", "'/my data'", "--n", "1"]}]),
    ("dict-values-resolved", P(m="x", d={"k": "${m}", "n": ["${m}"]}), {},
     [{"d": {"k": "x", "n": ["x"]}}]),
    # Section 3: variables.
    ("scalar-axis", {"variables": {"a": 1}}, {}, [{"a": 1}]),
    ("empty-axis-empty-plan", {"variables": {"a": [1], "b": []}}, {}, []),
    ("variable-overrides-parameter", {"parameters": {"a": 0, "b": "${a}"},
                                      "variables": {"a": [1, 2]}}, {},
     [{"a": 1, "b": 1}, {"a": 2, "b": 2}]),
    ("var-order", {"parameters": {"sys.plan_builder.var_order": ["b", "a"]},
                   "variables": {"a": [1, 2], "b": ["x", "y"]}}, {},
     [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "y"}]),
    ("planner-params-not-in-experiment",
     {"parameters": {"sys.plan_builder.var_order": ["a"]}, "variables": {"a": [1]}}, {},
     [{"a": 1}]),
    ("zipped-axis", {"variables": {"mb": [{"m": "resnet50", "b": 256}, {"m": "vgg16", "b": 64}],
                                   "g": [1, 2]}}, {},
     [{"m": "resnet50", "b": 256, "g": 1}, {"m": "resnet50", "b": 256, "g": 2},
      {"m": "vgg16", "b": 64, "g": 1}, {"m": "vgg16", "b": 64, "g": 2}]),
    ("dict-param-axis-not-zipped", {"parameters": {"d": {"val": {}, "type": "dict"}},
                                    "variables": {"d": [{"a": 1}, {"a": 2}]}}, {},
     [{"d": {"a": 1}}, {"d": {"a": 2}}]),
    ("axis-items-are-templates", {"parameters": {"g": 8},
                                  "variables": {"b": ["$(${g} * 2)$", "${g}"]}}, {},
     [{"b": 16}, {"b": 8}]),
    # Section 7: extensions.
    ("ext-regex-full-match", {"parameters": {"m": "resnet50", "x": 0},
                              "extensions": [{"condition": {"m": "resnet"},
                                              "parameters": {"x": 1}},
                                             {"condition": {"m": "resnet.*"},
                                              "parameters": {"y": 2}}]}, {},
     [{"m": "resnet50", "x": 0, "y": 2}]),
    ("ext-regex-on-rendered-number", {"parameters": {"n": 4},
                                      "extensions": [{"condition": {"n": "[2-8]"},
                                                      "parameters": {"hit": True}}]}, {},
     [{"n": 4, "hit": True}]),
    ("ext-list-membership", {"variables": {"n": [1, 2, 3]},
                             "extensions": [{"condition": {"n": [1, 3]},
                                             "parameters": {"odd": True}}]}, {},
     [{"n": 1, "odd": True}, {"n": 2}, {"n": 3, "odd": True}]),
    ("ext-scalar-type-and-value", {"variables": {"n": [4, "4", 4.0, True, 1]},
                                   "extensions": [{"condition": {"n": 4},
                                                   "parameters": {"hit": 1}},
                                                  {"condition": {"n": True},
                                                   "parameters": {"bool": 1}}]}, {},
     [{"n": 4, "hit": 1}, {"n": "4"}, {"n": 4.0}, {"n": True, "bool": 1}, {"n": 1}]),
    ("ext-all-tests-hold", {"variables": {"a": [1, 2], "b": ["x", "y"]},
                            "extensions": [{"condition": {"a": 1, "b": "y"},
                                            "parameters": {"hit": 1}}]}, {},
     [{"a": 1, "b": "x"}, {"a": 1, "b": "y", "hit": 1}, {"a": 2, "b": "x"},
      {"a": 2, "b": "y"}]),
    ("ext-missing-name-no-match", {"parameters": {"a": 1},
                                   "extensions": [{"condition": {"zz": ".*"},
                                                   "parameters": {"hit": 1}}]}, {},
     [{"a": 1}]),
    ("ext-cases", {"parameters": {"a": 1},
                   "extensions": [{"condition": {"a": 1}, "parameters": {"p": "base"},
                                   "cases": [{"c": 1}, {"c": 2, "p": "case"}]}]}, {},
     [{"a": 1, "p": "base", "c": 1}, {"a": 1, "p": "case", "c": 2}]),
    ("ext-groups", {"parameters": {"m": "resnet50"},
                    "extensions": [{"condition": {"m": "([a-z]+)([0-9]+)"},
                                    "parameters": {"fam": "${__condition.m_1}",
                                                   "depth": "$(int(${__condition.m_2}))$",
                                                   "all": "$<__condition.m_0>"}}]}, {},
     [{"m": "resnet50", "fam": "resnet", "depth": 50, "all": "resnet50"}]),
    ("ext-on-computed-value", {"parameters": {"g": "0,1",
                                              "n": "$(len('${g}'.split(',')))$"},
                               "extensions": [{"condition": {"n": 2},
                                               "parameters": {"multi": True}}]}, {},
     [{"n": 2, "multi": True}]),
    ("ext-later-sees-earlier", {"parameters": {"a": 1},
                                "extensions": [{"condition": {"a": 1}, "parameters": {"b": 2}},
                                               {"condition": {"b": 2},
                                                "parameters": {"c": 3}}]}, {},
     [{"a": 1, "b": 2, "c": 3}]),
    ("ext-groups-per-extension", {"parameters": {"a": "x1", "b": "y2"},
                                  "extensions": [{"condition": {"a": "x(.)"},
                                                  "parameters": {"ga": "${__condition.a_1}"}},
                                                 {"condition": {"b": "y(.)"},
                                                  "parameters": {"gb": "${__condition.b_1}"}}]},
     {}, [{"ga": "1", "gb": "2"}]),
    ("ext-sets-referenced-param", {"parameters": {"b": 16, "eff": "$(${b} * 2)$"},
                                   "variables": {"m": ["a", "big"]},
                                   "extensions": [{"condition": {"m": "big"},
                                                   "parameters": {"b": 4}}]}, {},
     [{"m": "a", "b": 16, "eff": 32}, {"m": "big", "b": 4, "eff": 8}]),
]


@pytest.mark.parametrize("spec, env, expected",
                         [pytest.param(s, e, x, id=i) for i, s, e, x in RESOLVES])
def test_resolves(spec: dict[str, Any], env: dict[str, str], expected: list[dict[str, Any]]):
    experiments = plan_doc(spec, env)
    assert len(experiments) == len(expected)
    for experiment, want in zip(experiments, expected):
        for key, value in want.items():
            assert key in experiment, key
            assert experiment[key] == value, key
            assert type(experiment[key]) is type(value), key


def test_regex_groups_never_leak_into_the_plan():
    spec = {"parameters": {"m": "resnet50"},
            "extensions": [{"condition": {"m": "(res)net"}, "parameters": {"x": 1}},
                           {"condition": {"m": "(.*)"}, "parameters": {"y": "${__condition.m_1}"}}]}
    (experiment,) = plan_doc(spec)
    assert not [k for k in experiment if k.startswith("__")]
    assert experiment["y"] == "resnet50" and "x" not in experiment


def test_axis_name_of_zipped_axis_never_appears():
    (experiment,) = plan_doc({"variables": {"pair": [{"a": 1, "b": 2}]}})
    assert experiment == {"a": 1, "b": 2}


def test_cli_overrides():
    spec = {"parameters": {"a": 1, "b": "x"}, "variables": {"v": [1, 2], "w": ["p"]}}
    experiments = plan_doc(spec, params=("a=5", "b=not json", "c={\"k\": 1}"),
                           variables=("v=[7]", "new=[true, false]", "raw=abc"))
    assert [(e["v"], e["w"], e["new"]) for e in experiments] == [(7, "p", True), (7, "p", False)]
    assert experiments[0]["a"] == 5 and experiments[0]["b"] == "not json"
    assert experiments[0]["c"] == {"k": 1} and experiments[0]["raw"] == "abc"


def test_variable_beats_parameter_from_cli():
    experiments = plan_doc({"variables": {"a": [1, 2]}}, params=("a=9",))
    assert [e["a"] for e in experiments] == [1, 2]


def test_v_replaces_axis_in_place():
    experiments = plan_doc({"variables": {"a": [1, 2], "b": ["x", "y"]}}, variables=("a=[3]",))
    assert [(e["a"], e["b"]) for e in experiments] == [(3, "x"), (3, "y")]


def test_e_appends_extension():
    experiments = plan_doc({"parameters": {"a": 1}},
                           extensions=('{"condition": {"a": 1}, "parameters": {"b": 2}}',))
    assert experiments[0]["b"] == 2


ERRORS = [
    ("worked-cycle", P(a="${b}", b="${a}"), "cycle: a -> b -> a"),
    ("cycle-path", P(a="${b}", b="${c}", c="$(${a} + 1)$"), "cycle: a -> b -> c -> a"),
    ("self-cycle", P(a="x${a}"), "cycle: a -> a"),
    ("worked-import", P(a="$(__import__('os').system('id'))$"), "not allowed in an expression"),
    ("dunder", P(a="$(''.__class__)$"), "not allowed in an expression"),
    ("open", P(a="$(open('/etc/passwd').read())$"), "not allowed in an expression"),
    ("format", P(a="$('{0.__class__}'.format(1))$"), "not allowed in an expression"),
    ("getattr", P(a="$(getattr(1, 'real'))$"), "not allowed in an expression"),
    ("huge-power", P(a="$(9 ** 9 ** 9)$"), "size limit"),
    ("huge-string", P(a="$('x' * 10 ** 9)$"), "size limit"),
    ("unbalanced-ref", P(a="${b"), "unbalanced reference"),
    ("unbalanced-angle", P(a="$<b"), "unbalanced reference"),
    ("unbalanced-expr", P(a="$(1 + 1"), "unbalanced expression"),
    ("nested-expr", P(a="$( $(1)$ )$"), "cannot contain another"),
    ("expr-syntax", P(a="$(1 +)$"), "invalid expression syntax"),
    ("expr-runtime", P(a="$(1 / 0)$"), "ZeroDivisionError"),
    ("undefined", P(a="${exp.modle}", **{"exp.model": "m"}), "undefined name 'exp.modle'"),
    ("choices", {"parameters": {"a": {"val": "x", "choices": ["y", "z"]}}},
     "not one of the choices"),
    ("choices-synonym", {"parameters": {"a": {"val": "x", "val_domain": ["y"]}}},
     "not one of the choices"),
    ("regex", {"parameters": {"a": {"val": "12a", "regex": "[0-9]+"}}},
     "does not match the regex"),
    ("regex-synonym", {"parameters": {"a": {"val": "12a", "val_regex": "[0-9]+"}}},
     "does not match the regex"),
    ("regex-is-full-match", {"parameters": {"a": {"val": "x12", "regex": "[0-9]+"}}},
     "does not match the regex"),
    ("cast-int", {"parameters": {"a": {"val": "2.5x", "type": "int"}}}, "cannot cast to int"),
    ("cast-bool", {"parameters": {"a": {"val": "maybe", "type": "bool"}}}, "not a bool"),
    ("cast-int-from-bool", {"parameters": {"a": {"val": True, "type": "int"}}},
     "cannot cast to int"),
    ("cast-list", {"parameters": {"a": {"val": 3, "type": "list"}}}, "cannot cast to list"),
    ("variable-checked-too", {"parameters": {"a": {"val": 1, "type": "int"}},
                              "variables": {"a": [1, "x"]}}, "experiment: a=x"),
    ("unknown-type", {"parameters": {"a": {"val": 1, "type": "integer"}}},
     "unknown type 'integer'"),
    ("unknown-definition-key", {"parameters": {"a": {"val": 1, "tpye": "int"}}},
     "unknown key 'tpye'"),
    ("bad-regex", {"parameters": {"a": {"val": 1, "regex": "("}}}, "invalid regex"),
    ("parameters-type", {"parameters": [1]}, "'parameters' must be an object"),
    ("variables-type", {"variables": [1]}, "'variables' must be an object"),
    ("extensions-type", {"extensions": {"a": 1}}, "'extensions' must be a list"),
    ("extension-key", {"extensions": [{"condition": {}, "parameter": {}}]},
     "unknown extension key 'parameter'"),
    ("extension-bad-regex", {"extensions": [{"condition": {"a": "("}}]},
     "invalid regular expression"),
    ("mixed-zipped-axis", {"variables": {"a": [{"b": 1}, 2]}}, "mixes objects and values"),
    ("var-order-unknown", {"parameters": {"sys.plan_builder.var_order": ["zz"]},
                           "variables": {"a": [1]}}, "'zz' is not a variable"),
    ("error-names-experiment", {"variables": {"m": ["ok", "bad"]},
                                "parameters": {"x": "$(1 if '${m}' == 'ok' else 1 / 0)$"}},
     "spec.yaml: parameter 'x': expression failed: ZeroDivisionError: division by zero "
     "(experiment: m=bad)"),
    ("bad-name", {"parameters": {"a${b}": 1}}, "invalid parameter name"),
]


@pytest.mark.parametrize("spec, message", [pytest.param(s, m, id=i) for i, s, m in ERRORS])
def test_errors(spec: dict[str, Any], message: str):
    with pytest.raises(ConfigError) as caught:
        plan_doc(spec)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_undefined_name_suggests_closest():
    with pytest.raises(ConfigError) as caught:
        plan_doc(P(**{"exp.model": "m", "a": "${exp.modle}"}))
    assert "parameter 'a'" in caught.value.message
    assert caught.value.hint == "did you mean 'exp.model'?"


def test_unknown_type_suggests():
    with pytest.raises(ConfigError) as caught:
        plan_doc({"parameters": {"a": {"val": 1, "type": "integr"}}})
    assert "'int'" in (caught.value.hint or "")
