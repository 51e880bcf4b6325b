"""`significant_all`, the fast path of the text formats, writes what `significant` writes."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dlbs.report.numbers import significant, significant_all

POWERS = np.array([10.0 ** k for k in range(-320, 309)])
EDGES = np.concatenate([
    POWERS, np.nextafter(POWERS, 0), np.nextafter(POWERS, np.inf), -POWERS,
    [0.0, -0.0, np.nan, np.inf, -np.inf, 2.0 ** 53, 2.0 ** 53 - 1, -(2.0 ** 53), 2.0 ** 60,
     5e-324, 1.7976931348623157e308, 999.99995, 9.99995, 0.99995, 0.00099995, -0.5, 0.5,
     1.5, 2.5, 1234.5, 12345.5, 0.1 + 0.2, 1 / 3],
])


def test_every_edge_is_written_as_significant_writes_it() -> None:
    assert significant_all(EDGES) == [significant(value) for value in EDGES.tolist()]
    assert significant_all(np.array([])) == []


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
                max_size=50))
def test_any_floats_are_written_as_significant_writes_them(values: list[float]) -> None:
    assert significant_all(np.array(values, dtype=np.float64)) == \
        [significant(value) for value in values]


def test_a_large_sample_of_measured_values() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.lognormal(0, 6, 50_000) * rng.choice([-1, 1], 50_000),
                             *(np.round(rng.normal(0, 1e5, 1_000), digits)
                               for digits in range(6))])
    assert significant_all(values) == [significant(value) for value in values.tolist()]
