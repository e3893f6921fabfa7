"""The platform's names: layers, asset keys and tags, streams, pools, the lake's folders."""

from typing import Final

import dagster as dg

# Layers.
BRONZE: Final = "bronze"
SILVER: Final = "silver"
GOLD: Final = "gold"

# Landing zone: files dropped by upstream systems at <root>/landing/<source>/*.csv.
LANDING_DIR: Final = "landing"
# A source's rejected records go to silver.<source>_quarantine.
QUARANTINE_SUFFIX: Final = "_quarantine"
# Each replay of a quarantine logs the records it read again in <quarantine>_replays.
REPLAYS_SUFFIX: Final = "_replays"

# Silver tables that grow with time are partitioned by DATE, the UTC date of one of their columns
# (a pipeline names which), so that a run's merges and reads touch only the days its changes span.
DATE: Final = "date"
# Bronze Kafka tables are partitioned by the UTC date of the Kafka record timestamp.
KAFKA_BRONZE_PARTITION: Final = DATE
# Folder under the lake root holding the Spark streaming checkpoints, one per stream.
CHECKPOINTS_DIR: Final = "_checkpoints"


def asset_tags(layer: str, source: str) -> dict[str, str]:
    """The tags of a table's asset: its layer and the source it comes from."""
    return {"lakehouse/layer": layer, "lakehouse/source": source}


def asset_key(layer: str, table: str) -> dg.AssetKey:
    """The asset key of a table: ``[layer, table]``."""
    return dg.AssetKey([layer, table])


def stream_name(layer: str, table: str) -> str:
    """The name of the stream feeding a table; also its Delta app id and Kafka consumer group."""
    return f"lakehouse-{layer}-{table}"


def writer_pool(layer: str, table: str) -> str:
    """The Dagster pool of the step that writes a table: pools hold one step at a time
    (``default_limit: 1`` in dagster.yaml), so two runs that both select a table (two streams'
    runs meeting downstream) write it one after the other. A bronze table's pool is its stream's
    name, which also keeps one run at a time on its checkpoint."""
    return stream_name(layer, table)


def consumer_app_id(table: str, upstream: tuple[str, str]) -> str:
    """The transaction app id under which ``silver.<table>`` records the version of ``upstream``
    (layer, table) it has consumed."""
    return f"{SILVER}.{table}<-{'.'.join(upstream)}"
