"""Released protocol-batch members: ``shuffler_released`` (exactly-once users).

A protocol task's users are counted by the shuffler (user markers, or the messages of a
one-message-per-user protocol), and the analyzer receives only that count. A client whose
acknowledgement was lost re-sends the same upload; once the pool it was in has been released its
rows are no longer pending, so without a record of them the shuffler accepted them again and the
next batch counted those users a second time (``n`` and ``protocol.privacy(n)`` inflated). The
shuffler now keeps the digests of every released protocol-batch member, with the batch window,
until that window is past retention (``service/retention.py``), and answers re-sent ones as
duplicates. ``WITHOUT ROWID`` on SQLite: no insertion order at rest.

Revision ID: 0007
Revises: 0006
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("shuffler_released", sa.Column("task_id", sa.LargeBinary(32), nullable=False),
                    sa.Column("envelope_digest", sa.LargeBinary(32), nullable=False),
                    sa.Column("window", sa.BigInteger, nullable=False),
                    sa.PrimaryKeyConstraint("task_id", "envelope_digest"),
                    sqlite_with_rowid=False)
    op.create_index("ix_released_window", "shuffler_released", ["task_id", "window"])


def downgrade() -> None:
    op.drop_index("ix_released_window", table_name="shuffler_released")
    op.drop_table("shuffler_released")
