"""The harness's queue of waiting samples: batches are slices, in order, each sample once."""

from __future__ import annotations

import pytest
from benchmark_common.sample_queue import SampleQueue
from hypothesis import given
from hypothesis import strategies as st

#: A put (a query of that many samples) or a take (of up to that many).
OPERATIONS = st.lists(st.tuples(st.sampled_from(["put", "take"]), st.integers(0, 40)),
                      max_size=60)


@given(OPERATIONS)
def test_batches_are_the_waiting_samples_in_order_with_ids_and_indices_paired(operations):
    queue = SampleQueue()
    model: list[tuple[int, int, float]] = []  # (id, index, arrival) of each waiting sample
    issued = 0
    taken: list[int] = []
    for clock, (what, count) in enumerate(operations):
        if what == "put":
            ids = list(range(issued, issued + count))
            queue.put([1000 + i for i in ids], [i % 7 for i in ids], float(clock))
            model += [(1000 + i, i % 7, float(clock)) for i in ids]
            issued += count
        else:
            ids, indices = queue.take(count)
            expected, model = model[:count], model[count:]
            assert ids == [sample_id for sample_id, _, _ in expected]
            assert indices == [index for _, index, _ in expected]
            taken += ids
        assert len(queue) == queue.waiting == len(model)
        if model:
            assert queue.oldest_arrival() == model[0][2]
    rest, _ = queue.take(len(model) + 1)
    assert taken + rest == [1000 + i for i in range(issued)]  # each sample once, in order
    assert len(queue) == 0 and queue.take(5) == ([], [])


def test_a_batch_never_shares_a_list_with_the_queue():
    queue = SampleQueue()
    ids, indices = [1, 2, 3], [7, 8, 9]
    queue.put(ids, indices, 0.0)
    taken_ids, taken_indices = queue.take(3)
    taken_ids.append(4)
    taken_indices[0] = 0
    queue.put(ids, indices, 1.0)
    assert queue.take(10) == ([1, 2, 3], [7, 8, 9])


def test_a_query_whose_lists_differ_in_length_is_refused():
    with pytest.raises(ValueError, match="2 response ids for 3 sample indices"):
        SampleQueue().put([1, 2], [1, 2, 3], 0.0)
