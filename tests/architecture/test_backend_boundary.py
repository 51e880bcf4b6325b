"""The lists repeated across the dlbs/backend boundary stay equal, and both sides read alike.

The backends run without dlbs (inside containers and jobs), so `python/benchmark_common` keeps
its own copy of what dlbs also knows: the yes/no words (dlbs/util/booleans.py), the dtype names
(`exp.dtype`), the trace levels (`exp.trace_level`) and the scenarios (`exp.scenario`). One
copy on each side; these tests keep the two equal.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner
from dlbs.util import booleans

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

from benchmark_common import flags, options  # noqa: E402 - the backends' folder, added above

ENV = {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root"}
WORDS = [(word, True) for word in flags.TRUE_WORDS] + [(word, False) for word in
                                                        flags.FALSE_WORDS]


def test_the_yes_no_words_are_dlbs_words():
    assert flags.TRUE_WORDS == booleans.TRUE_WORDS
    assert flags.FALSE_WORDS == booleans.FALSE_WORDS


@given(st.one_of(st.text(max_size=6),
                 st.sampled_from([w for w, _ in WORDS]).map(lambda w: f" {w.upper()} ")))
def test_any_text_reads_alike_on_both_sides(text):
    try:
        backend_reading = flags.parse_bool(text)
    except argparse.ArgumentTypeError:
        backend_reading = None
    assert backend_reading == booleans.parse_bool(text)


@pytest.mark.parametrize(("parameter", "backend_names"), [
    ("exp.dtype", list(flags.DTYPES)),
    ("exp.trace_level", list(flags.TRACE_LEVELS)),
    ("exp.scenario", list(options.SCENARIOS)),
])
def test_a_parameters_choices_are_the_backends_names(parameter, backend_names):
    assert load_spec().params[parameter].choices == backend_names


def test_mxnet_takes_canonical_dtype_names():
    from mxnet_benchmarks.options import DTYPES

    assert set(DTYPES) <= set(flags.DTYPES.values())


def _pytorch(word):
    from pytorch_benchmarks.cli import parse_options

    return parse_options(["--model", "m", "--data_shuffle", word]).data_shuffle


def _mxnet(word):
    from mxnet_benchmarks.options import parse_options

    return parse_options(["--model", "m", "--device", "cpu", "--data_shuffle", word]).data_shuffle


def _onnxruntime(word):
    from onnxruntime_benchmarks.options import parse_options

    return parse_options(["--model", "m", "--forward_only", "--device", "cpu",
                          "--allow_spinning", word]).allow_spinning


def _dummy(word):
    from dummy_benchmarks.benchmarks import parse_options

    return parse_options(["--busy", word]).busy


@pytest.mark.parametrize("read", [_pytorch, _mxnet, _onnxruntime, _dummy],
                         ids=lambda read: read.__name__.strip("_"))
@pytest.mark.parametrize(("word", "value"), WORDS)
def test_every_backend_reads_every_word(read, word, value):
    assert read(word) is value
    assert read(word.upper()) is value


@pytest.mark.parametrize(("word", "value"), WORDS)
def test_dlbs_plans_every_word(word, value):
    spec = load_spec(params=[f"exp.use_tensor_core={word}"])
    (experiment,) = Planner(spec, ENV).experiments()
    assert experiment["exp.use_tensor_core"] is value
