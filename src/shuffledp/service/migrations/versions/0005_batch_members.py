"""Shuffler batches formed in bounded steps: ``shuffler_batches.members``.

A batch is formed without holding the write lock for the whole pool: one short transaction
records the batch (state ``forming``) with its member list — the SHA-256 digests of the pending
reports it takes, in the CSPRNG order of the release — then each bounded chunk of members moves
from ``shuffler_pending`` to ``shuffler_batch_items`` in its own transaction, and a last one sets
the state to ``ready`` and clears the list. After a crash the batcher finishes every ``forming``
batch from its list before anything else, so no report is lost or released twice.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("shuffler_batches", sa.Column("members", sa.LargeBinary, nullable=True))


def downgrade() -> None:
    # a batch still forming cannot be represented before 0005: refuse rather than lose its reports
    n = op.get_bind().exec_driver_sql("SELECT count(*) FROM shuffler_batches WHERE state = 'forming'").scalar()
    if n:
        raise RuntimeError(f"{n} shuffler batch(es) are still forming; run the shuffler once to finish them "
                           "before downgrading below 0005")
    with op.batch_alter_table("shuffler_batches") as b:
        b.drop_column("members")
