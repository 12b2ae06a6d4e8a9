"""Which request carried what, for as long as the KV pool may hand its entries to a read.

A misplaced row reads entries by their owner's uid. The owner may still be running, or
may have finished with its blocks back on the free list, its entries still there until
a new owner overwrites them: what the row read is then that finished request's context,
and what the reply may write is its facts. So a finished request's facts are kept while
any of its entries is in the pool, and no longer: the memory this takes is bounded by
the pool's size, whatever the number of requests served.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from server_patch.sim.facts import Carried

#: Finished requests kept before the first check of which still have entries.
FIRST_PRUNE = 64


class CarriedFacts:
    """uid -> what that request carries, for running and recently finished requests."""

    def __init__(self, owners_in_pool: Callable[[], Iterable[int]]) -> None:
        self._owners_in_pool = owners_in_pool
        self._running: dict[int, Carried] = {}
        self._finished: dict[int, Carried] = {}
        self._prune_at = FIRST_PRUNE

    def __len__(self) -> int:
        return len(self._running) + len(self._finished)

    def start(self, uid: int, carried: Carried) -> None:
        self._running[uid] = carried

    def finish(self, uid: int) -> None:
        """The request left the batch; its entries stay readable until overwritten."""
        carried = self._running.pop(uid, None)
        if carried is None:
            return
        self._finished[uid] = carried
        if len(self._finished) >= self._prune_at:
            self._prune()

    def get(self, uid: int) -> Carried | None:
        return self._running.get(uid) or self._finished.get(uid)

    def _prune(self) -> None:
        """Forget finished requests none of whose entries is left in the pool; check
        again once as many more have finished (amortized: one pool scan per doubling)."""
        present = set(self._owners_in_pool())
        self._finished = {uid: c for uid, c in self._finished.items() if uid in present}
        self._prune_at = max(FIRST_PRUNE, 2 * len(self._finished))
