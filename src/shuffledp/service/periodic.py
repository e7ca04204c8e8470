"""A daemon thread that runs one step every ``every`` seconds until stopped (the shuffler's batcher,
the analyzer's retention): a failed step is logged by its exception type and the loop goes on,
since the state each step works on is in the database."""

from __future__ import annotations

import logging
import threading
from typing import Callable

__all__ = ["PeriodicThread"]


class PeriodicThread:
    """Run ``step()`` every ``every`` seconds in a daemon thread named ``name``.

    ``start`` is idempotent and does nothing when ``every <= 0``; ``stop`` sets the stop event and
    joins for at most ``join_timeout`` seconds. A step's exception is logged to ``log`` at error
    level as ``"<what> round failed: <type>"`` (the type only: a message could carry user data).
    """

    def __init__(self, name: str, every: float, step: Callable[[], object], log: logging.Logger, what: str,
                 join_timeout: float = 10.0) -> None:
        self.name, self.every, self.step, self.log, self.what = name, every, step, log, what
        self.join_timeout = join_timeout
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.every > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.join_timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.step()
            except Exception as e:  # keep running; the state is in the DB
                self.log.error("%s round failed: %s", self.what, type(e).__name__)
