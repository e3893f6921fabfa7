"""The project's defs tree: a folder per declared source, its ``defs.yaml`` naming
``lakehouse_assets.components.Source`` (``dg scaffold defs``; docs/sources.md)."""
