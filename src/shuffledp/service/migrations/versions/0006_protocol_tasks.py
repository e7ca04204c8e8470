"""Protocol tasks: users counted by markers, batches that carry their user count and shuffler.

- ``shuffler_pending.users``: 1 for a **user marker** (a client's declaration that one user's
  messages, possibly none, went to this shuffler), 0 for a message envelope. A pool is released
  once it holds enough users; only the count travels to the analyzer, never the markers.
- ``shuffler_batches.n_users``: the users a protocol batch holds (NULL for local-oracle tasks).
- ``analyzer_ledger.n_users`` and ``analyzer_ledger.shuffler``: the forwarding shuffler's index and
  its user count per batch; a window's release (all shufflers' batches of that window) states
  ``protocol.privacy(n)`` for the users all of them delivered.

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("shuffler_pending") as b:
        b.add_column(sa.Column("users", sa.SmallInteger, nullable=False, server_default="0"))
    op.add_column("shuffler_batches", sa.Column("n_users", sa.Integer, nullable=True))
    with op.batch_alter_table("analyzer_ledger") as b:
        b.add_column(sa.Column("n_users", sa.Integer, nullable=True))
        b.add_column(sa.Column("shuffler", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("analyzer_ledger") as b:
        b.drop_column("shuffler")
        b.drop_column("n_users")
    with op.batch_alter_table("shuffler_batches") as b:
        b.drop_column("n_users")
    with op.batch_alter_table("shuffler_pending") as b:
        b.drop_column("users")
