"""The background index builder: moves a namespace's pending memories into its HNSW graph.

A restore, a pull, or a catch-up of many changes holds the new memories in the index's
rows (vector copy and ranking attributes) without inserting them into the graph
(``NamespaceIndex.defer``): inserting is about 1 ms a memory on one thread, so inline it
bounded a restore by the HNSW rate, and a recall that found the graph missing built it
first (838 s at 1M memories, issue 28). Meanwhile recall answers from the graph plus an
exact scan of the pending vectors (``NamespaceIndex.search``), and one thread per
namespace, at the lowest CPU priority, inserts them in key order:

* in batches under the engine lock (the lock recall and every index write hold), sized
  so a batch holds it about :data:`BATCH_SECONDS`: a recall waits at most one batch.
  USearch releases the GIL while it inserts, so the rest of the process runs meanwhile;
* memory stays bounded: a batch copies at most :data:`MAX_BATCH` vectors;
* saved every ``IndexStore.save_threshold`` memories and when done (the rows file
  marks what is still pending, so a process killed mid-build resumes from its last
  save: the next open finds the pending memories and starts a builder again);
* cancelled by ``IndexStore.close`` (the Memory's close, before it releases the data
  dir lock): the thread stops before its next batch, and close saves what it built.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .index import NamespaceIndex

__all__ = ["BATCH_SECONDS", "MAX_BATCH", "Builder"]

log = logging.getLogger(__name__)

BATCH_SECONDS: Final = 0.03
"""Target time one batch holds the engine lock (what a recall may wait for)."""
MAX_BATCH: Final = 1024
_FIRST_BATCH: Final = 16
_LOCK_POLL: Final = 0.05
_RUNNING: weakref.WeakSet[Builder] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """At interpreter exit, stop the builders of Memories nobody closed: a daemon thread
    still inside USearch while the interpreter tears down aborts the process."""
    running = list(_RUNNING)
    for builder in running:
        builder.cancel()
    for builder in running:
        builder.join(5.0)


class Builder(threading.Thread):
    """One namespace's background build. ``step(idx, limit)`` runs under ``lock`` and
    returns how many memories it moved (0: nothing left); ``current()`` is the index the
    store holds for the namespace now (the build stops if it is another one);
    ``saved(idx)`` is called under the lock after each batch, to save when due."""

    def __init__(self, idx: NamespaceIndex, lock: threading.RLock,
                 current: Callable[[], NamespaceIndex | None],
                 saved: Callable[[NamespaceIndex, bool], None]) -> None:
        super().__init__(name=f"walrus-mem-index-builder-{idx.path.stem[:8]}", daemon=True)
        self.idx = idx
        self._lock = lock
        self._current = current
        self._saved = saved
        self.stopping = threading.Event()
        self.built = 0
        self.error: BaseException | None = None

    def cancel(self) -> None:
        self.stopping.set()

    def start(self) -> None:
        _RUNNING.add(self)
        super().start()

    def run(self) -> None:
        try:  # the lowest priority for this thread only (Linux: a thread is a task)
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except (AttributeError, OSError):
            pass
        size = _FIRST_BATCH
        try:
            while not self.stopping.is_set():
                if not self._lock.acquire(timeout=_LOCK_POLL):
                    continue  # close() holds it while it cancels us: poll the flag
                try:
                    if self.stopping.is_set() or self._current() is not self.idx:
                        return
                    started = time.perf_counter()
                    moved = self.idx.build_step(size)
                    took = time.perf_counter() - started
                    self.built += moved
                    done = moved == 0 or self.idx.pending == 0
                    self._saved(self.idx, done)
                    if done:
                        return
                finally:
                    self._lock.release()
                if took > 0:
                    size = max(1, min(MAX_BATCH, 2 * size, int(size * BATCH_SECONDS / took)))
                time.sleep(0.001)  # let a waiting recall or write take the lock
        except BaseException as exc:
            self.error = exc
            log.warning("background index build of %s stopped: %s: %s", self.idx.path.name,
                        type(exc).__name__, exc)
