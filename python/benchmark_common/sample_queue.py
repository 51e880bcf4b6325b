"""The samples LoadGen has issued that no lane has taken yet, oldest first.

LoadGen hands the harness each query as two parallel lists (its fast system under test,
`ConstructFastSUT`): the samples' response ids and their indices in the sample library.
The queue keeps every query as it came, a chunk with the time it arrived, and gives batches
out as slices of the chunks: an offline query of a million samples is served 256 at a time
without a Python object or a pop per sample. The oldest waiting sample's arrival is the time
a server's `max_queue_delay_ms` counts from.

Standard library only. Not thread-safe: the harness calls it under its condition's lock.
"""

from __future__ import annotations

import collections
from typing import List, Sequence, Tuple  # noqa: UP035 - Python 3.8 too

#: A batch taken from the queue: the samples' response ids and their indices, in order.
Batch = Tuple[List[int], List[int]]  # noqa: UP006


class SampleQueue:
    """Waiting samples in arrival order, as (ids, indices) chunks with arrival times."""

    def __init__(self) -> None:
        self._chunks: collections.deque = collections.deque()  # (ids, indices, arrival)
        self._offset = 0  # samples already taken from the oldest chunk
        self.waiting = 0

    def __len__(self) -> int:
        return self.waiting

    def put(self, ids: Sequence[int], indices: Sequence[int], arrival: float) -> None:
        """Queue one query's samples, arrived at `arrival` (lists are kept, not copied)."""
        if len(ids) != len(indices):
            raise ValueError(f"{len(ids)} response ids for {len(indices)} sample indices")
        if len(ids):
            self._chunks.append((ids if isinstance(ids, list) else list(ids),
                                 indices if isinstance(indices, list) else list(indices),
                                 arrival))
            self.waiting += len(ids)

    def oldest_arrival(self) -> float:
        """When the oldest waiting sample arrived (the queue must not be empty)."""
        return self._chunks[0][2]

    def take(self, limit: int) -> Batch:
        """Up to `limit` of the oldest waiting samples, as fresh lists (ids, indices)."""
        chunks = self._chunks
        ids: list[int] = []
        indices: list[int] = []
        while limit > 0 and chunks:
            chunk_ids, chunk_indices, _ = chunks[0]
            start = self._offset
            end = min(start + limit, len(chunk_ids))
            if ids:
                ids += chunk_ids[start:end]
                indices += chunk_indices[start:end]
            else:  # most batches come from one chunk: its slices are the batch
                ids, indices = chunk_ids[start:end], chunk_indices[start:end]
            limit -= end - start
            if end == len(chunk_ids):
                chunks.popleft()
                self._offset = 0
            else:
                self._offset = end
        self.waiting -= len(ids)
        return ids, indices
