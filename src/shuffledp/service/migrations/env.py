"""Alembic environment: runs on the connection the service hands over (storage.upgrade)."""

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only the packaged upgrade path is supported
    raise RuntimeError("run migrations through shuffledp.service.storage.upgrade(engine)")
context.configure(connection=connection, target_metadata=None, version_table="shuffledp_alembic_version")
with context.begin_transaction():
    context.run_migrations()
