"""Ledger: the client windows of each batch's valid reports (group privacy over windows).

``client_windows`` is a JSON list of the distinct client-clock windows (``time // batch_window``,
the windows the SDK's per-window cap counts) of a batch's valid reports. NULL on rows written
before this revision; the analyzer then assumes the widest span the batch's accepted time range
allows (``retention``-style conservative fallback, see ``analyzer._ledger_windows``).

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("analyzer_ledger") as b:
        b.add_column(sa.Column("client_windows", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("analyzer_ledger") as b:
        b.drop_column("client_windows")
