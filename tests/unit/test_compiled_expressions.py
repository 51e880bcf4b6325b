"""Expressions parsed once per template give what the whole text gives, errors included.

`SafeEvaluator.evaluate_parts` fills reference values into a tree parsed once
(dlbs/config/compiled.py); `evaluate` of the joined text is the reference. Both run on
templates from the default configs and on ones made to trip the compiled path (f-strings,
bytes, comments, escapes, names), with values that hold quotes, backslashes and line breaks.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlbs.config.compiled import text_of
from dlbs.config.evaluator import SafeEvaluator
from dlbs.config.template import Expr, parse
from dlbs.errors import ConfigError

TEMPLATES = [
    "'training' if '${a}' == 'benchmark' else 'inference'",
    "len('${a}'.split(',')) if '${a}' else 1",
    "len(re.split('[:,]', '${a}')) if '${b}' else 0",
    "${a} * ${b}",
    "'gpu' if ${a} > 0 else 'cpu'",
    "'/workspace/data' if ${a} and '${b}' else '${b}'",
    "'${a}:/workspace/data:ro' if '${a}' else ''",
    "re.sub('[.]log$', '', '${a}') + '.trace.json.gz' if '${b}' != 'none' else ''",
    "'--scenario ${a} --target_qps ${b}' if '${a}' != 'benchmark' else ''",
    "${a} if ${b} > 1 and '${a}' == 'none' else None",
    "'${a}'.rpartition(':')[0] if '${b}' else None",
    "'/x/' + os.path.basename('${a}') if ${b} else '${a}'",
    "{'${a}': '${b}'}",
    "['${a}', '${b}', '${a}${b}']",
    "'${a}' '${b}'",
    "r'${a}' + u'${b}'",
    "'''${a}''' + \"${b}\"",
    "f'{1}${a}' + '${b}'",
    "f'${a}{len(\"${b}\")}'",
    "b'${a}' + b'${b}'",
    "'${a}' # ${b}",
    "'\\x${a}' + '${b}'",
    "'\\1${a}'",
    "'\\${a}'",
    "'\\n${a}' + '${b}'",
    "'\\101${a}${b}'",
    "'${b}\\\\${a}'",
    "x${a} + '${b}'",
    "'${a}'.${b}",
    "'${a}'[${b}]",
    "len('${a}') + ${b}",
    "'${a}' * 3",
    "1${a}",
    "${a}",
    "'${a}${b}${a}'",
    "'_dlbs_hole_0_' + '${a}'",
]
# Values as rendered into expressions, and ones that break out of a string literal.
VALUES = st.one_of(
    st.sampled_from(["", "none", "benchmark", "0", "2", "0,1", "1:2", "true", "null",
                     "logs/a_b.log", "x.log", "'", "\"", "\\", "\\n", "a\nb", "a\rb",
                     "' + '", "{", "}", "{0}", "#", "_dlbs_hole_1_", "split", "upper",
                     "\ud800", "\x00", "é", "1e3", "[1, 2]", "a" * 200]),
    st.text(alphabet="ab'\"\\\n{}#:,. 01_", max_size=8),
    st.text(max_size=6),
)


def _outcome(call: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "value", call(*args)
    except ConfigError as error:
        return "error", (error.message, error.hint)


def _split(template: str) -> Expr:
    (expr,) = parse("$(" + template + ")$").parts
    assert isinstance(expr, Expr)
    return expr


@pytest.mark.parametrize("template", TEMPLATES)
def test_literals_and_references_make_the_body_again(template):
    expr = _split(template)
    holes = ["${" + ref.name + "}" for ref in expr.refs]
    assert text_of(expr.literals, holes) == template


@settings(max_examples=60, deadline=None)
@given(template=st.sampled_from(TEMPLATES),
       sweep=st.lists(st.tuples(VALUES, VALUES), min_size=1, max_size=6))
def test_filled_trees_evaluate_as_the_text_does(template, sweep):
    expr = _split(template)
    compiled = SafeEvaluator()  # one for the sweep: its trees and answers are reused
    for a, b in sweep + sweep[:1]:
        values = {"a": a, "b": b}
        holes = [values[ref.name] for ref in expr.refs]
        text = text_of(expr.literals, holes)
        expected = _outcome(SafeEvaluator().evaluate, text)
        assert _outcome(compiled.evaluate_parts, expr.literals, holes) == expected


def test_answers_are_kept_by_the_values_read():
    # b is `none`: the condition never reads a, so no value of a is evaluated again.
    expr = _split("re.sub('[.]log$', '', '${a}') + '.gz' if '${b}' != 'none' else ''")
    evaluator = SafeEvaluator()
    evaluated = []
    real_eval = evaluator._evaluator._eval
    evaluator._evaluator._eval = lambda node: evaluated.append(node) or real_eval(node)
    for index in range(50):
        assert evaluator.evaluate_parts(expr.literals, [f"logs/{index}.log", "none"]) == ""
    assert evaluator.evaluate_parts(expr.literals, ["logs/x.log", "step"]) == "logs/x.gz"
    assert evaluator.evaluate_parts(expr.literals, ["logs/y.log", "step"]) == "logs/y.gz"
    roots = [node for node in evaluated if node is evaluated[0]]
    assert len(roots) == 3  # the first `none`, then each `step` with its own a


def test_a_sweep_parses_each_template_once(monkeypatch):
    import ast

    parsed = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda text, *a, **k: parsed.append(text) or
                        real_parse(text, *a, **k))
    expr = _split("re.sub('[.]log$', '', '${a}') + '.gz' if '${b}' != 'none' else ''")
    evaluator = SafeEvaluator()
    for index in range(100):
        assert evaluator.evaluate_parts(expr.literals, [f"logs/{index}.log", "step"]) == \
            f"logs/{index}.gz"
    # One parse to find the fillable holes, one tree for the code holes' values (none).
    assert len(parsed) == 2
