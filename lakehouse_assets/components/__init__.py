"""The project's Dagster component types (``dg list components``)."""

from lakehouse_assets.components.source import Source

__all__ = ["Source"]
