"""Shuffler pending reports without an implicit arrival order (SQLite ``WITHOUT ROWID``).

An ordinary SQLite table keeps an implicit ``rowid`` that grows in insertion order, so the
``shuffler_pending`` rows of 0001 (composite primary key, hence a separate rowid) recorded the
arrival order of every pending report for anyone reading the database file. On SQLite this
revision recreates the table ``WITHOUT ROWID`` (rows are stored in primary-key order: task id,
SHA-256 of the envelope), copies the rows, drops the old table and renames the new one, then
recreates ``ix_pending_group``, all with ``PRAGMA secure_delete`` on (restored afterwards), so
the old table's pages are zeroed as they are freed and its rows and rowids do not linger in the
file's free pages. On PostgreSQL it does nothing: heap tuples have no such column to drop (their physical
position and ``xmin`` still follow insertion; see docs/services.md, "Metadata").

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

COLS = "task_id, envelope_digest, crowd_id, \"window\", envelope"


def _rebuild(with_rowid: bool) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    # secure_delete for the whole rebuild: the old table's pages are zeroed as they are freed, and so
    # are the stale cells B-tree page splits leave behind while the copy fills the new table
    old = bind.exec_driver_sql("PRAGMA secure_delete").scalar()
    bind.exec_driver_sql("PRAGMA secure_delete = ON")
    try:
        op.create_table("shuffler_pending_new", sa.Column("task_id", sa.LargeBinary(32), nullable=False),
                        sa.Column("envelope_digest", sa.LargeBinary(32), nullable=False),
                        sa.Column("crowd_id", sa.LargeBinary, nullable=False),
                        sa.Column("window", sa.BigInteger, nullable=False),
                        sa.Column("envelope", sa.LargeBinary, nullable=False),
                        sa.PrimaryKeyConstraint("task_id", "envelope_digest"),
                        sqlite_with_rowid=with_rowid)
        # ORDER BY the key: also the rowid table of a downgrade gets rowids unrelated to arrival
        op.execute(f"INSERT INTO shuffler_pending_new ({COLS}) SELECT {COLS} FROM shuffler_pending "
                   "ORDER BY task_id, envelope_digest")
        op.drop_table("shuffler_pending")                   # drops ix_pending_group with it
        op.rename_table("shuffler_pending_new", "shuffler_pending")
        op.create_index("ix_pending_group", "shuffler_pending", ["task_id", "crowd_id", "window"])
    finally:
        bind.exec_driver_sql(f"PRAGMA secure_delete = {int(old)}")


def upgrade() -> None:
    _rebuild(with_rowid=False)


def downgrade() -> None:
    _rebuild(with_rowid=True)
