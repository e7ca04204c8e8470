"""Storage: SQLAlchemy 2 Core tables, engine setup, and Alembic migrations shipped in the package.

SQLite (default): WAL journal, ``synchronous=FULL`` (a commit survives power loss once
acknowledged), ``busy_timeout``, foreign keys, and every transaction opened with
``BEGIN IMMEDIATE`` (SQLAlchemy's documented pysqlite workaround) so writers serialize instead
of failing on lock upgrades. PostgreSQL by URL (``postgresql+psycopg://...``), READ COMMITTED
with unique constraints for idempotency.

No table has an autoincrement key or a wall-clock arrival column: shuffler rows are keyed by
the SHA-256 of the envelope, and the only time information is the window index. On SQLite
``shuffler_pending`` is a ``WITHOUT ROWID`` table (migration 0004): an ordinary table keeps an
implicit ``rowid`` that grows in insertion order, i.e. the arrival order of every pending report;
without it rows are stored and scanned in primary-key order (task id, envelope digest), a hash
unrelated to arrival. PostgreSQL heap tuples still carry their insertion order (``ctid``, ``xmin``):
see docs/services.md, "Metadata".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import (BigInteger, Column, Float, Index, Integer, LargeBinary, MetaData, PrimaryKeyConstraint,
                        SmallInteger, String, Table, Text, create_engine, event)
from sqlalchemy.engine import Engine

__all__ = ["metadata", "make_engine", "read_connection", "upgrade", "insert_ignore", "existing_report_ids",
           "insert_report_ids", "move_pending_to_batch", "delete_pending_digests"]

metadata = MetaData()

# ------------------------------------------------------------------ shuffler
shuffler_tasks = Table(
    "shuffler_tasks", metadata,
    Column("task_id", LargeBinary(32), primary_key=True),
    Column("config", Text, nullable=False),
    Column("analyzer_url", Text, nullable=False),
    Column("key_ids", Text, nullable=False),          # JSON list of accepted analyzer key ids
    Column("min_batch_size", Integer, nullable=False),
)
shuffler_pending = Table(
    "shuffler_pending", metadata,
    Column("task_id", LargeBinary(32), nullable=False),
    Column("envelope_digest", LargeBinary(32), nullable=False),
    Column("crowd_id", LargeBinary, nullable=False),
    Column("window", BigInteger, nullable=False),
    Column("envelope", LargeBinary, nullable=False),
    # migration 0006: 1 for a user marker of a protocol task (empty envelope, never forwarded), else 0
    Column("users", SmallInteger, nullable=False, server_default="0"),
    PrimaryKeyConstraint("task_id", "envelope_digest"),
    Index("ix_pending_group", "task_id", "crowd_id", "window"),
    sqlite_with_rowid=False,   # no implicit rowid = no arrival order at rest (migration 0004)
)
shuffler_batches = Table(
    "shuffler_batches", metadata,
    Column("batch_id", LargeBinary(32), primary_key=True),
    Column("task_id", LargeBinary(32), nullable=False),
    Column("crowd_id", LargeBinary, nullable=False),
    Column("window", BigInteger, nullable=False),
    Column("n", Integer, nullable=False),
    # forming | ready | retrying | delivered | rejected | discarded (| expired: rejected before 0005)
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", Float, nullable=False, default=0.0),
    Column("last_error", Text),
    # migration 0005: while ``state = 'forming'``, the SHA-256 digests (32 bytes each) of the pending
    # reports the batch takes, released ones (positions 0..n-1, CSPRNG order) then noise-dropped ones;
    # NULL once the batch is formed (shuffler._form_batches moves the reports in bounded chunks)
    Column("members", LargeBinary, nullable=True),
    # migration 0006: users of a protocol batch (NULL for local-oracle tasks)
    Column("n_users", Integer, nullable=True),
    Index("ix_batches_state", "state"),
    Index("ix_shuffler_batches_task", "task_id", "state", "window"),
)
shuffler_batch_items = Table(
    "shuffler_batch_items", metadata,
    Column("batch_id", LargeBinary(32), nullable=False),
    Column("pos", Integer, nullable=False),
    Column("envelope", LargeBinary, nullable=False),
    PrimaryKeyConstraint("batch_id", "pos"),
)
# migration 0007: digests of the members of released protocol batches (user markers, messages and
# fakes), kept until the batch window is past retention, so that a client re-sending an upload whose
# acknowledgement was lost is not counted again once its pool was released: the analyzer only gets
# the shuffler's user count and cannot deduplicate users itself. No arrival order at rest (SQLite
# WITHOUT ROWID; rows are inserted in the release's CSPRNG order).
shuffler_released = Table(
    "shuffler_released", metadata,
    Column("task_id", LargeBinary(32), nullable=False),
    Column("envelope_digest", LargeBinary(32), nullable=False),
    Column("window", BigInteger, nullable=False),
    PrimaryKeyConstraint("task_id", "envelope_digest"),
    Index("ix_released_window", "task_id", "window"),
    sqlite_with_rowid=False,
)
shuffler_counters = Table(
    "shuffler_counters", metadata,
    Column("task_id", LargeBinary(32), nullable=False),
    Column("name", String(64), nullable=False),
    Column("value", BigInteger, nullable=False),
    PrimaryKeyConstraint("task_id", "name"),
)

# ------------------------------------------------------------------ analyzer
analyzer_tasks = Table(
    "analyzer_tasks", metadata,
    Column("task_id", LargeBinary(32), primary_key=True),
    Column("config", Text, nullable=False),
    Column("config_digest", LargeBinary(32), nullable=False),
    Column("active", Integer, nullable=False, default=1),
)
analyzer_keys = Table(
    "analyzer_keys", metadata,
    Column("key_id", Integer, primary_key=True, autoincrement=False),
    Column("public_key", LargeBinary, nullable=False),
    Column("private_key", LargeBinary, nullable=False),
    Column("state", String(16), nullable=False),      # active | expired
)
analyzer_batches = Table(
    "analyzer_batches", metadata,
    Column("batch_id", LargeBinary(32), primary_key=True),
    Column("task_id", LargeBinary(32), nullable=False),
    Column("crowd_id", LargeBinary, nullable=False),
    Column("window", BigInteger, nullable=False),
    Column("n_received", Integer, nullable=False),
    Column("n_valid", Integer, nullable=False),
    Column("result", Text, nullable=False),
    Index("ix_analyzer_batches_window", "task_id", "window"),
)
analyzer_report_ids = Table(
    "analyzer_report_ids", metadata,
    Column("task_id", LargeBinary(32), nullable=False),
    Column("report_id", LargeBinary(16), nullable=False),
    Column("batch_id", LargeBinary(32), nullable=False),
    PrimaryKeyConstraint("task_id", "report_id"),
    Index("ix_report_ids_batch", "task_id", "batch_id"),
)
# retention (migration 0002): replay rows of batches with window < purged_before_window are deleted,
# and reports that could belong to them are refused from then on (service/retention.py)
analyzer_retention = Table(
    "analyzer_retention", metadata,
    Column("task_id", LargeBinary(32), primary_key=True),
    Column("purged_before_window", BigInteger, nullable=False),
    Column("report_ids_deleted", BigInteger, nullable=False),
)
analyzer_aggregates = Table(
    "analyzer_aggregates", metadata,
    Column("task_id", LargeBinary(32), nullable=False),
    Column("window", BigInteger, nullable=False),
    Column("crowd_id", LargeBinary, nullable=False),
    Column("statistic", LargeBinary, nullable=False),
    Column("dtype", String(16), nullable=False),
    Column("shape", String(64), nullable=False),
    Column("n", BigInteger, nullable=False),
    PrimaryKeyConstraint("task_id", "window", "crowd_id"),
)
analyzer_ledger = Table(
    "analyzer_ledger", metadata,
    Column("batch_id", LargeBinary(32), primary_key=True),
    Column("task_id", LargeBinary(32), nullable=False),
    Column("window", BigInteger, nullable=False),
    Column("crowd_id", LargeBinary, nullable=False),
    Column("n_released", Integer, nullable=False),
    Column("n_valid", Integer, nullable=False),
    Column("eps_local", Float, nullable=False),
    Column("eps_central", Float, nullable=False),
    Column("delta", Float, nullable=False),
    Column("statement", Text, nullable=False),
    # migration 0003: JSON list of the client windows of the batch's valid reports (NULL before 0003)
    Column("client_windows", Text, nullable=True),
    # migration 0006: protocol batches: users the forwarding shuffler counted, and its index
    Column("n_users", Integer, nullable=True),
    Column("shuffler", Integer, nullable=True),
)
analyzer_queries = Table(
    "analyzer_queries", metadata,
    Column("query_id", LargeBinary(16), primary_key=True),
    Column("task_id", LargeBinary(32), nullable=False),
    Column("eps", Float, nullable=False),
    Column("result", Text, nullable=False),
)


def make_engine(url: str) -> Engine:
    """Engine with the durability settings above (SQLite) or plain (PostgreSQL)."""
    if url.startswith("sqlite"):
        eng = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(eng, "connect")
        def _on_connect(dbapi_conn, _rec):  # pragma: no cover - exercised by every test
            dbapi_conn.isolation_level = None  # let SQLAlchemy's begin event own transactions
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            # deleted rows (released/expired reports) are overwritten, not left in free pages
            cur.execute("PRAGMA secure_delete=ON")
            cur.close()

        @event.listens_for(eng, "begin")
        def _on_begin(conn):  # pragma: no cover
            # a read-only connection (read_connection) takes a deferred snapshot: in WAL mode it
            # never blocks, and is never blocked by, the writer
            conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get(READ_ONLY) else "BEGIN IMMEDIATE")

        return eng
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return create_engine(url, pool_pre_ping=True)


READ_ONLY = "shuffledp_read_only"


def read_connection(engine: Engine, snapshot: bool = False):
    """A connection for reads only: on SQLite its transactions are deferred (``BEGIN``), not
    ``BEGIN IMMEDIATE``, so a long read (a large pending pool) holds no write lock and ingestion
    proceeds; in WAL mode every statement of one transaction reads the same snapshot. On
    PostgreSQL READ COMMITTED, or REPEATABLE READ with ``snapshot`` (one snapshot for the whole
    transaction, as on SQLite). Use as a context manager."""
    conn = engine.connect().execution_options(**{READ_ONLY: True})
    if snapshot and engine.dialect.name == "postgresql":
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
    return conn


def alembic_config(connection: Any = None) -> Any:
    """The packaged migrations' Alembic ``Config`` (bound to ``connection`` when given)."""
    from alembic.config import Config

    here = Path(__file__).parent / "migrations"
    cfg = Config(str(here / "alembic.ini"))
    cfg.set_main_option("script_location", str(here))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade(engine: Engine) -> None:
    """Apply the packaged Alembic migrations up to head."""
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "head")


def insert_ignore(engine: Engine, table: Table):
    """``INSERT ... ON CONFLICT DO NOTHING`` for the engine's dialect."""
    if engine.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table).on_conflict_do_nothing()


# ------------------------------------------------------------------ analyzer hot path (driver SQL)
# Once per report: the ids travel as ONE concatenated blob of 16-byte ids that the database splits
# itself (SQLite recursive CTE / PostgreSQL generate_series), so there is no per-id Python object,
# bind parameter or SQLAlchemy type processing, and no bound-variable limit.
_SQLITE_IDS = ("WITH RECURSIVE ix(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM ix WHERE i + 1 < ?) "
               "SELECT substr(?, i * 16 + 1, 16) FROM ix")
_PG_IDS = "SELECT substring(%s::bytea from i * 16 + 1 for 16) FROM generate_series(0, %s - 1) AS i"


def existing_report_ids(conn, task_id: bytes, report_ids: bytes) -> set[bytes]:
    """The ids (``report_ids`` = concatenated 16-byte ids) already recorded for ``task_id``."""
    n = len(report_ids) // 16
    if n == 0:
        return set()
    if conn.dialect.name == "postgresql":
        rows = conn.exec_driver_sql("SELECT report_id FROM analyzer_report_ids WHERE task_id = %s AND report_id IN ("
                                    + _PG_IDS + ")", (task_id, report_ids, n))
    else:
        rows = conn.exec_driver_sql("SELECT report_id FROM analyzer_report_ids WHERE task_id = ? AND report_id IN ("
                                    + _SQLITE_IDS + ")", (task_id, n, report_ids))
    return {bytes(r[0]) for r in rows}


def insert_report_ids(conn, task_id: bytes, batch_id: bytes, report_ids: bytes) -> None:
    """Record the concatenated 16-byte ``report_ids`` as used by ``task_id`` (one statement)."""
    n = len(report_ids) // 16
    if n == 0:
        return
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("INSERT INTO analyzer_report_ids (task_id, report_id, batch_id) SELECT %s, "
                             "substring(%s::bytea from i * 16 + 1 for 16), %s FROM generate_series(0, %s - 1) AS i "
                             "ON CONFLICT DO NOTHING", (task_id, report_ids, batch_id, n))
    else:
        conn.exec_driver_sql("INSERT OR IGNORE INTO analyzer_report_ids (task_id, report_id, batch_id) "
                             "WITH RECURSIVE ix(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM ix WHERE i + 1 < ?) "
                             "SELECT ?, substr(?, i * 16 + 1, 16), ? FROM ix", (n, task_id, report_ids, batch_id))


# ------------------------------------------------------------------ shuffler batch formation (driver SQL)
# A chunk of a forming batch's member list (concatenated 32-byte digests) moves from
# shuffler_pending to shuffler_batch_items in two statements that split the blob in the database,
# as above: no per-report Python object or bind parameter, so a chunk holds the write lock briefly.
def move_pending_to_batch(conn, task_id: bytes, batch_id: bytes, first_pos: int, digests: bytes) -> int:
    """Copy the pending envelopes of ``digests`` (positions ``first_pos, first_pos + 1, ...``) into
    the batch's items (a position already there is left as it is); returns the rows inserted."""
    n = len(digests) // 32
    if n == 0:
        return 0
    if conn.dialect.name == "postgresql":
        r = conn.exec_driver_sql(
            "INSERT INTO shuffler_batch_items (batch_id, pos, envelope) SELECT %s, %s + i, p.envelope "
            "FROM generate_series(0, %s - 1) AS i JOIN shuffler_pending p ON p.task_id = %s "
            "AND p.envelope_digest = substring(%s::bytea from i * 32 + 1 for 32) ON CONFLICT DO NOTHING",
            (batch_id, first_pos, n, task_id, digests))
    else:
        r = conn.exec_driver_sql(
            "INSERT OR IGNORE INTO shuffler_batch_items (batch_id, pos, envelope) "
            "WITH RECURSIVE ix(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM ix WHERE i + 1 < ?) "
            "SELECT ?, ? + ix.i, p.envelope FROM ix JOIN shuffler_pending p ON p.task_id = ? "
            "AND p.envelope_digest = substr(?, ix.i * 32 + 1, 32)", (n, batch_id, first_pos, task_id, digests))
    return int(r.rowcount or 0)


def delete_pending_digests(conn, task_id: bytes, digests: bytes) -> int:
    """Delete the pending rows of ``task_id`` whose digests are in the concatenation ``digests``."""
    n = len(digests) // 32
    if n == 0:
        return 0
    if conn.dialect.name == "postgresql":
        r = conn.exec_driver_sql("DELETE FROM shuffler_pending WHERE task_id = %s AND envelope_digest IN ("
                                 "SELECT substring(%s::bytea from i * 32 + 1 for 32) FROM generate_series(0, %s - 1) "
                                 "AS i)", (task_id, digests, n))
    else:
        r = conn.exec_driver_sql("DELETE FROM shuffler_pending WHERE task_id = ? AND envelope_digest IN ("
                                 "WITH RECURSIVE ix(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM ix WHERE i + 1 < ?) "
                                 "SELECT substr(?, i * 32 + 1, 32) FROM ix)", (task_id, n, digests))
    return int(r.rowcount or 0)
