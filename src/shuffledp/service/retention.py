"""Retention rules shared by the shuffler and the analyzer (issue #6, ``retention_days``).

All ages are measured from the **end of a batch window** (the only time the services store),
never from an arrival time. ``P = retention_days * 86400`` seconds; a window ``w`` is *past
retention* at time ``now`` when ``(w + 1) * batch_window <= now - P``, i.e. ``w < retention_horizon``.

The durability promise is "every report the shuffler acknowledged is aggregated exactly once, or
counted as expired". Retention must not add a silent loss path, so:

Shuffler
    - A **pending** report is deleted by retention only if its window is past retention *and* past
      ``max_wait_windows`` (the batcher would expire it anyway: it is below the threshold for longer
      than the task allows). Retention runs right after a batching round, so a pool that could be
      released has been released first. Deleted rows are counted ``expired_retention``. The
      effective retention of a pending report is therefore ``max(retention, max_wait)``.
    - A batch the analyzer has **not acknowledged** (``ready`` / ``retrying``) is owed to the analyzer
      and is never deleted by retention; it is reported (``owed_batches_past_retention``) and logged.
    - A **rejected** batch (the analyzer refused its content) is not deleted by retention either: its
      reports were acknowledged to their clients, so the operator decides (``shuffledp shuffler
      requeue`` or ``discard``); it is reported (``rejected_batches_past_retention``) and logged.
      State ``expired`` (envelopes deleted) exists only in databases from before this rule.
    - **Delivered** batches hold no envelopes (deleted on acknowledgement); their rows (id, window,
      count) are the shuffler's delivery log and are kept, like the analyzer's ledger.

Analyzer
    - The mergeable statistic (``analyzer_aggregates``), the ledger, the per-batch rows (which make a
      late re-delivery idempotent forever) and the central-mode query log are kept: they hold no
      per-report data.
    - The per-report replay-check rows (``analyzer_report_ids``) of batches whose window is before
      the purge watermark ``W`` are deleted. ``W`` never passes the point where a batch formed
      *now* could still contain reports of that age (``current - max_wait - 1 - ceil(2 skew / bw)``).
    - Because a deleted report id can no longer be checked for replay, the analyzer from then on
      refuses every report whose client time could belong to a purged batch, i.e. time (in
      ``time_precision`` units) ``<= (W * batch_window + skew) // time_precision``; they are
      counted ``expired`` in the batch response. The watermark is stored per task and only grows.
"""

from __future__ import annotations

import math

from .config import TaskConfig

__all__ = ["retention_horizon", "shuffler_pending_horizon", "analyzer_purge_before", "refused_time_limit"]

DAY = 86400


def retention_horizon(cfg: TaskConfig, now: float) -> int:
    """First window index that is *not* past retention at ``now`` (windows ``< h`` are past it)."""
    return int(math.floor((now - cfg.retention_days * DAY) / cfg.batch_window))


def shuffler_pending_horizon(cfg: TaskConfig, now: float, close_delay: float = 0.0) -> int:
    """Pending rows with ``window < h`` may be deleted: past retention and past ``max_wait_windows``."""
    closed = int((now - close_delay) // cfg.batch_window) - 1       # last closed window (batcher's rule)
    past_max_wait = closed - cfg.max_wait_windows + 1                # the batcher expires windows < this
    return min(retention_horizon(cfg, now), past_max_wait)


def analyzer_purge_before(cfg: TaskConfig, now: float) -> int:
    """Watermark ``W``: replay rows of batches with ``window < W`` may be deleted at ``now``."""
    bw = cfg.batch_window
    current = int(now // bw)
    guard = current - cfg.max_wait_windows - 1 - math.ceil(2 * cfg.tolerable_clock_skew / bw)
    return min(retention_horizon(cfg, now), guard)


def refused_time_limit(cfg: TaskConfig, purged_before: int) -> int:
    """Client times (``time_precision`` units) ``<=`` this may belong to a purged batch: refuse them.

    A report accepted in a batch of window ``w`` has time ``<= ((w + 1) * bw + skew) // tp`` (the
    analyzer's window check), and every purged batch has ``w <= W - 1``.
    """
    return (purged_before * cfg.batch_window + cfg.tolerable_clock_skew) // cfg.time_precision
