"""What a check found: how many rows broke it and a few of them (every kind of check, the
table's own rules, declared expectations and reconciliations alike)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SAMPLE_ROWS = 5  # offending rows shown with a failed check


@dataclass(frozen=True)
class Outcome:
    """One check's result: the rows breaking it (for a uniqueness check: the rows beyond the
    first of each repeated value) and a sample of them."""

    name: str
    offending: int
    sample: list[dict[str, Any]]

    @property
    def passed(self) -> bool:
        return self.offending == 0
