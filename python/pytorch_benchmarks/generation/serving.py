"""Continuous batching: requests join and leave one engine's running batch as they come and go.

A `Replica` serves one engine's slots from the queue LoadGen's requests wait in
(`benchmark_common.token_harness.RequestQueue`), on a thread of its own:

1. admission: while slots are free and requests wait, it takes up to that many, puts each in
   the lowest free slot and prefills them (in groups of at most `engine.PREFILL_TOKENS`
   padded positions, each group one call, its prompts right-padded to the longest: padding,
   not packing); after each group a stamp, whose passing is the group's first tokens;
2. one decode step over slots [0, highest busy slot] (the smallest prepared size that covers
   it; a free slot inside that range computes a token nobody reads), then a stamp; a request
   whose last token this step makes is complete at that stamp and its slot is free at once;
3. again, waiting for a request only when no slot is busy.

The host never reads a token: it knows from the requests' lengths when each is done. It
keeps at most `AHEAD` steps queued on the device ahead of the last one passed, so that an
arriving request waits for at most that many steps before its prefill starts, and hands
every stamp with its requests to the harness's reporter, which waits for the device to pass
it and tells LoadGen (FirstTokenComplete, QuerySamplesComplete) at that moment.

A prefill stops the running batch's decode while it runs (no chunked prefill): the time per
output token of the requests decoding includes the prefills of those that arrive meanwhile.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
from collections.abc import Sequence
from typing import Any

import torch

from .engine import Engine, Requests, prefill_groups
from .stamps import Stamps

#: Decode steps (and prefills) the host keeps queued on the device beyond the last passed.
AHEAD = 2


class Replica:
    """One engine serving its slots by continuous batching (module doc)."""

    def __init__(self, engine: Engine, requests: Requests, stamps: Stamps) -> None:
        self.engine = engine
        self.requests = requests
        self.stamps = stamps
        self.reset()

    def reset(self) -> None:
        """Start counting what it serves afresh (`line`)."""
        self.completed = 0
        self.steps = 0
        self.busy_slot_steps = 0
        self.computed_slot_steps = 0
        self.prefills = 0

    def prepare(self, sizes: Sequence[int]) -> None:
        """Compile (and capture) the decode sizes and both prefill graphs (batches of 1, 2)."""
        engine = self.engine
        on_gpu = engine.device.type == "cuda"
        with torch.cuda.device(engine.device) if on_gpu else contextlib.nullcontext():
            engine.prepare_decode(sizes)
            batches = [[0, 1], [0]] if engine.slots > 1 and len(self.requests) > 1 else [[0]]
            for indices in batches:
                lengths = [self.requests.lengths[index][0] for index in indices]
                engine.prefill(list(range(len(indices))), self.requests.prompts(indices),
                               lengths)
            if on_gpu:
                torch.cuda.synchronize(engine.device)

    def serve(self, queue: Any, report: Any) -> None:
        """Serve from `queue` until it is closed and every admitted request is complete.

        `queue.take(limit, block)` gives (response ids, request indices), or None once closed
        and empty; `report.first(ids, stamp)` and `report.complete(ids, tokens, stamp)` tell
        the harness what is done when the device passes `stamp`.
        """
        engine, stamps = self.engine, self.stamps
        free = list(range(engine.slots))
        heapq.heapify(free)
        active: dict[int, list[int]] = {}  # slot -> [response id, decode steps left, tokens]
        queued: collections.deque = collections.deque()
        closed = False
        while True:
            if free and not closed:
                taken = queue.take(len(free), block=not active)
                if taken is None:
                    closed = True
                elif taken[0]:
                    self._admit(taken, free, active, queued, report)
            if not active:
                if closed:
                    return
                continue
            size = engine.decode_size(max(active))
            engine.decode(size)
            stamp = stamps.now()
            self.steps += 1
            self.busy_slot_steps += len(active)
            self.computed_slot_steps += size
            done_ids, done_tokens = [], []
            for slot in [slot for slot, state in active.items() if state[1] == 1]:
                response_id, _, tokens = active.pop(slot)
                done_ids.append(response_id)
                done_tokens.append(tokens)
                heapq.heappush(free, slot)
            for state in active.values():
                state[1] -= 1
            if done_ids:
                self.completed += len(done_ids)
                report.complete(done_ids, done_tokens, stamp)
            self._keep_ahead(queued, stamp)

    def _admit(self, taken: tuple[list[int], list[int]], free: list[int],
               active: dict[int, list[int]], queued: collections.deque, report: Any) -> None:
        ids, indices = taken
        lengths = self.requests.lengths
        slots = [heapq.heappop(free) for _ in ids]
        for group in prefill_groups([lengths[index][0] for index in indices]):
            group_indices = [indices[at] for at in group]
            self.engine.prefill([slots[at] for at in group],
                                self.requests.prompts(group_indices),
                                [lengths[index][0] for index in group_indices])
            stamp = self.stamps.now()
            self.prefills += 1
            report.first([ids[at] for at in group], stamp)
            self._keep_ahead(queued, stamp)
        for response_id, index, slot in zip(ids, indices, slots):
            output = lengths[index][1]
            active[slot] = [response_id, output - 1, output]

    def _keep_ahead(self, queued: collections.deque, stamp: Any) -> None:
        queued.append(stamp)
        if len(queued) > AHEAD:
            self.stamps.wait(queued.popleft())

    def line(self, reset: bool = False) -> str:
        """What it served since it was last reset, for the log."""
        text = "no decode step" if not self.steps else (
            f"{self.completed} requests, {self.prefills} prefill calls, {self.steps} decode "
            f"steps, {self.busy_slot_steps / self.steps:.1f} busy slots per step of "
            f"{self.computed_slot_steps / self.steps:.1f} computed")
        if reset:
            self.reset()
        return text
