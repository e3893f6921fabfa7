"""The document store of ``route-by-type`` sources: the application's PostgreSQL database, one
table per document kind, ``(id text primary key, doc jsonb)``."""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg
from pydantic import Field

from resources import ENV_DOCUMENTS_URL


class DocumentStoreError(RuntimeError):
    """The document store is not configured, cannot be reached, or lacks a table."""


class DocumentStoreResource(dg.ConfigurableResource):
    """Where a route-by-type source reads its documents (the executors connect to it too)."""

    url: str | None = Field(
        default=None,
        description="A libpq URL, postgresql://user:password@host:port/database "
        f"({ENV_DOCUMENTS_URL}).",
    )

    def checked_url(self, tables: Iterable[str]) -> str:
        """The store's URL, once it is reached and holds ``tables``.

        Raises:
            DocumentStoreError: no URL is set, the store cannot be reached, or a table is missing.
        """
        import psycopg2

        if not self.url:
            raise DocumentStoreError(
                "A route-by-type source reads its documents from PostgreSQL: set "
                f"{ENV_DOCUMENTS_URL} to the store's URL (postgresql://user:password@host/db)."
            )
        try:
            connection = psycopg2.connect(self.url, connect_timeout=15)
        except psycopg2.OperationalError as error:
            raise DocumentStoreError(
                f"The document store ({ENV_DOCUMENTS_URL}) cannot be reached: {error}"
            ) from None
        names = list(tables)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT to_regclass(t) FROM unnest(%s::text[]) AS t", [names])
                found = [row[0] for row in cursor.fetchall()]
                missing = [name for name, at in zip(names, found, strict=True) if at is None]
        finally:
            connection.close()
        if missing:
            raise DocumentStoreError(
                f"The document store ({ENV_DOCUMENTS_URL}) has no table {', '.join(missing)}: each "
                "document kind's table holds (id text primary key, doc jsonb)."
            )
        return self.url
