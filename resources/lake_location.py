"""Where the lake lives: its root, the location and catalog name of each table
(``<root>/<layer>/<table>``), and the files beside the tables (schemas, checkpoints, landing)."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from resources import catalog, files, object_store
from resources.object_store import hadoop_uri
from resources.settings import check_schema_prefix, schema_prefix


class LakeLocation(dg.ConfigurableResource):
    """The lake's configuration and the paths it gives."""

    root: str = Field(
        default="lake",
        description="Lake root: a local folder (relative to the working directory) or an "
        "object-store URI (s3://, abfss://, gs://).",
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Options for delta-rs on object storage, beyond those it reads from the "
        "standard variables (AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL...).",
    )
    max_files_per_trigger: int = Field(
        default=1000, description="Landing-zone files read per micro-batch at most."
    )
    schema_prefix: str = Field(
        default_factory=schema_prefix,
        description="The prefix of the lake's schemas in the catalog (LAKEHOUSE_SCHEMA_PREFIX): "
        "with `acme`, its tables are acme_bronze.<table>, acme_silver.<table>, acme_gold.<table>; "
        "without, bronze.<table>, silver.<table>, gold.<table>.",
    )

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Before a step or a sensor touches the lake: a clear error, naming the root, when its
        object store cannot be used (``object_store.check_root``) or its schema prefix is not an
        identifier."""
        check_schema_prefix(self.schema_prefix, "The lake's schema_prefix")
        object_store.check_root(self.root_uri)

    @property
    def root_uri(self) -> str:
        """The lake root as an absolute path or URI."""
        return object_store.absolute(self.root)

    def table_uri(self, layer: str, table: str) -> str:
        """Location of a table: ``<root>/<layer>/<table>``."""
        return f"{self.root_uri}/{layer}/{table}"

    def table_name(self, layer: str, table: str) -> str:
        """The table's name in the catalog: ``<schema>.<table>`` (``resources.catalog``)."""
        return f"{catalog.schema_name(self.schema_prefix, layer)}.{table}"

    def path(self, *parts: str) -> str:
        """A location under the lake root (checkpoints, landing zone)."""
        return "/".join([self.root_uri, *parts])

    def spark_path(self, *parts: str) -> str:
        """A location under the lake root as Spark (Hadoop) names it: s3:// becomes s3a://."""
        return hadoop_uri(self.path(*parts))

    def read_text(self, *parts: str) -> str | None:
        """The text of the file at ``<root>/<parts...>``, or None when there is none."""
        return files.read_text(self.path(*parts))

    def write_text(self, text: str, *parts: str) -> None:
        """Write ``text`` to the file at ``<root>/<parts...>``, whole (``files.write_text``)."""
        files.write_text(self.path(*parts), text)

    def tables(self, layer: str) -> list[str]:
        """The names of the tables of ``layer`` in the lake (folders with a Delta log)."""
        return files.delta_folders(self.path(layer))
