"""The calendar resource: the date that stands for "today" (``LAKEHOUSE_AS_OF_DATE``)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import dagster as dg
from pydantic import Field, field_validator


class CalendarResource(dg.ConfigurableResource):
    """Where logic depends on "today" (age bins), it asks this resource, never the clock."""

    as_of_date: str | None = Field(
        default=None,
        description="ISO date used as today (LAKEHOUSE_AS_OF_DATE); the current UTC date if unset.",
    )

    @field_validator("as_of_date", mode="before")
    @classmethod
    def _iso_date(cls, value: str | None) -> str | None:
        if isinstance(value, dg.EnvVar):  # checked when Dagster reads the variable
            return value
        if value:
            try:
                date.fromisoformat(value)
            except ValueError as error:
                raise ValueError(
                    f"LAKEHOUSE_AS_OF_DATE must be an ISO date like 2026-11-21, got {value!r}"
                ) from error
        return value or None

    def today(self) -> date:
        """The as-of date."""
        if self.as_of_date:
            return date.fromisoformat(self.as_of_date)
        return datetime.now(UTC).date()
