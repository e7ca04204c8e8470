"""Retention: per-task purge watermark of the analyzer, indexes for deleting by window.

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("analyzer_retention", sa.Column("task_id", sa.LargeBinary(32), primary_key=True),
                    sa.Column("purged_before_window", sa.BigInteger, nullable=False),
                    sa.Column("report_ids_deleted", sa.BigInteger, nullable=False))
    op.create_index("ix_report_ids_batch", "analyzer_report_ids", ["task_id", "batch_id"])
    op.create_index("ix_analyzer_batches_window", "analyzer_batches", ["task_id", "window"])
    op.create_index("ix_shuffler_batches_task", "shuffler_batches", ["task_id", "state", "window"])


def downgrade() -> None:
    op.drop_index("ix_shuffler_batches_task", "shuffler_batches")
    op.drop_index("ix_analyzer_batches_window", "analyzer_batches")
    op.drop_index("ix_report_ids_batch", "analyzer_report_ids")
    op.drop_table("analyzer_retention")
