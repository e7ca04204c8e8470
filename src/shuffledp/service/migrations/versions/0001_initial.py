"""Initial schema: shuffler and analyzer tables (append-only migrations from here on).

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

B32 = sa.LargeBinary(32)


def upgrade() -> None:
    op.create_table("shuffler_tasks", sa.Column("task_id", B32, primary_key=True),
                    sa.Column("config", sa.Text, nullable=False), sa.Column("analyzer_url", sa.Text, nullable=False),
                    sa.Column("key_ids", sa.Text, nullable=False),
                    sa.Column("min_batch_size", sa.Integer, nullable=False))
    op.create_table("shuffler_pending", sa.Column("task_id", B32, nullable=False),
                    sa.Column("envelope_digest", B32, nullable=False),
                    sa.Column("crowd_id", sa.LargeBinary, nullable=False),
                    sa.Column("window", sa.BigInteger, nullable=False),
                    sa.Column("envelope", sa.LargeBinary, nullable=False),
                    sa.PrimaryKeyConstraint("task_id", "envelope_digest"))
    op.create_index("ix_pending_group", "shuffler_pending", ["task_id", "crowd_id", "window"])
    op.create_table("shuffler_batches", sa.Column("batch_id", B32, primary_key=True),
                    sa.Column("task_id", B32, nullable=False), sa.Column("crowd_id", sa.LargeBinary, nullable=False),
                    sa.Column("window", sa.BigInteger, nullable=False), sa.Column("n", sa.Integer, nullable=False),
                    sa.Column("state", sa.String(16), nullable=False),
                    sa.Column("attempts", sa.Integer, nullable=False),
                    sa.Column("next_attempt_at", sa.Float, nullable=False), sa.Column("last_error", sa.Text))
    op.create_index("ix_batches_state", "shuffler_batches", ["state"])
    op.create_table("shuffler_batch_items", sa.Column("batch_id", B32, nullable=False),
                    sa.Column("pos", sa.Integer, nullable=False),
                    sa.Column("envelope", sa.LargeBinary, nullable=False),
                    sa.PrimaryKeyConstraint("batch_id", "pos"))
    op.create_table("shuffler_counters", sa.Column("task_id", B32, nullable=False),
                    sa.Column("name", sa.String(64), nullable=False),
                    sa.Column("value", sa.BigInteger, nullable=False), sa.PrimaryKeyConstraint("task_id", "name"))

    op.create_table("analyzer_tasks", sa.Column("task_id", B32, primary_key=True),
                    sa.Column("config", sa.Text, nullable=False), sa.Column("config_digest", B32, nullable=False),
                    sa.Column("active", sa.Integer, nullable=False))
    op.create_table("analyzer_keys", sa.Column("key_id", sa.Integer, primary_key=True, autoincrement=False),
                    sa.Column("public_key", sa.LargeBinary, nullable=False),
                    sa.Column("private_key", sa.LargeBinary, nullable=False),
                    sa.Column("state", sa.String(16), nullable=False))
    op.create_table("analyzer_batches", sa.Column("batch_id", B32, primary_key=True),
                    sa.Column("task_id", B32, nullable=False), sa.Column("crowd_id", sa.LargeBinary, nullable=False),
                    sa.Column("window", sa.BigInteger, nullable=False),
                    sa.Column("n_received", sa.Integer, nullable=False),
                    sa.Column("n_valid", sa.Integer, nullable=False), sa.Column("result", sa.Text, nullable=False))
    op.create_table("analyzer_report_ids", sa.Column("task_id", B32, nullable=False),
                    sa.Column("report_id", sa.LargeBinary(16), nullable=False),
                    sa.Column("batch_id", B32, nullable=False), sa.PrimaryKeyConstraint("task_id", "report_id"))
    op.create_table("analyzer_aggregates", sa.Column("task_id", B32, nullable=False),
                    sa.Column("window", sa.BigInteger, nullable=False),
                    sa.Column("crowd_id", sa.LargeBinary, nullable=False),
                    sa.Column("statistic", sa.LargeBinary, nullable=False),
                    sa.Column("dtype", sa.String(16), nullable=False), sa.Column("shape", sa.String(64), nullable=False),
                    sa.Column("n", sa.BigInteger, nullable=False),
                    sa.PrimaryKeyConstraint("task_id", "window", "crowd_id"))
    op.create_table("analyzer_ledger", sa.Column("batch_id", B32, primary_key=True),
                    sa.Column("task_id", B32, nullable=False), sa.Column("window", sa.BigInteger, nullable=False),
                    sa.Column("crowd_id", sa.LargeBinary, nullable=False),
                    sa.Column("n_released", sa.Integer, nullable=False),
                    sa.Column("n_valid", sa.Integer, nullable=False),
                    sa.Column("eps_local", sa.Float, nullable=False), sa.Column("eps_central", sa.Float, nullable=False),
                    sa.Column("delta", sa.Float, nullable=False), sa.Column("statement", sa.Text, nullable=False))
    op.create_table("analyzer_queries", sa.Column("query_id", sa.LargeBinary(16), primary_key=True),
                    sa.Column("task_id", B32, nullable=False), sa.Column("eps", sa.Float, nullable=False),
                    sa.Column("result", sa.Text, nullable=False))


def downgrade() -> None:
    for t in ("analyzer_queries", "analyzer_ledger", "analyzer_aggregates", "analyzer_report_ids",
              "analyzer_batches", "analyzer_keys", "analyzer_tasks", "shuffler_counters", "shuffler_batch_items",
              "shuffler_batches", "shuffler_pending", "shuffler_tasks"):
        op.drop_table(t)
