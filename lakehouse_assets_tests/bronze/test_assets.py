"""The bronze Kafka assets against the real embedded broker and real Spark."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession

from lakehouse_assets.bronze import assets as bronze_assets
from lakehouse_assets.bronze.position import StreamPosition
from lakehouse_assets.constants import BRONZE, stream_name
from lakehouse_assets.fitness.names import TOPIC_BPM
from lakehouse_assets_tests.bronze.helpers import (
    bronze_sequence_numbers,
    heart_rates,
    materialize_bpm,
)
from lakehouse_assets_tests.conftest import empty, produce
from lakehouse_tools.broker import EmbeddedBroker, free_port
from resources import KafkaResource
from resources.checkpoints import record_cluster, recorded_cluster


@pytest.mark.local_spark  # also on a local Spark application
def test_every_record_lands_exactly_once_across_runs(
    broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    resources["kafka"].create_topic(TOPIC_BPM, partitions=4)
    produced = 0
    for round_size in (4000, 1, 2500):
        produced += produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(produced, round_size))
        result = materialize_bpm(resources)
        assert bronze_sequence_numbers(spark, resources) == list(range(produced))
        metadata = result.asset_materializations_for_node("bronze__bpm")[0].metadata
        assert metadata["dagster/row_count"].value == produced
    table = resources["lake"].read(spark, BRONZE, TOPIC_BPM)
    assert table.select("partition").distinct().count() == 4
    assert table.select("partition", "offset").distinct().count() == produced


def test_batches_are_bounded_and_still_exact(
    broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    resources["kafka"] = KafkaResource(
        bootstrap_servers=broker.bootstrap_servers, max_records_per_trigger=1000
    )
    resources["kafka"].create_topic(TOPIC_BPM, partitions=3)
    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(0, 4500))
    result = materialize_bpm(resources)
    metadata = result.asset_materializations_for_node("bronze__bpm")[0].metadata
    batches = metadata["batches_committed"].value
    assert isinstance(batches, int) and batches >= 5  # 4500 records, at most 1000 per batch
    assert bronze_sequence_numbers(spark, resources) == list(range(4500))


def test_missing_topic_gives_an_empty_table_then_its_records(
    broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    materialize_bpm(resources)
    assert resources["lake"].exists(BRONZE, TOPIC_BPM)
    assert bronze_sequence_numbers(spark, resources) == []

    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(0, 300))  # auto-creates the topic
    materialize_bpm(resources)
    assert bronze_sequence_numbers(spark, resources) == list(range(300))


def test_processed_offsets_are_committed_to_the_stream_consumer_group(
    broker: EmbeddedBroker, resources: dict[str, Any]
) -> None:
    kafka: KafkaResource = resources["kafka"]
    kafka.create_topic(TOPIC_BPM, partitions=2)
    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(0, 1500))
    materialize_bpm(resources)
    committed = kafka.group_offsets(stream_name(BRONZE, TOPIC_BPM), [TOPIC_BPM])
    assert sum(committed.values()) == 1500
    assert committed == kafka.end_offsets([TOPIC_BPM])
    assert kafka.lag([TOPIC_BPM], committed) == {(TOPIC_BPM, 0): 0, (TOPIC_BPM, 1): 0}


def test_unreachable_broker_names_the_servers_and_leaves_the_table_unchanged(
    broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(0, 100))
    materialize_bpm(resources)
    version = resources["lake"].version(BRONZE, TOPIC_BPM)

    nowhere = f"127.0.0.1:{free_port()}"
    resources["kafka"] = KafkaResource(bootstrap_servers=nowhere, connect_timeout_ms=2000)
    with pytest.raises(Exception, match=nowhere):
        materialize_bpm(resources)
    assert resources["lake"].version(BRONZE, TOPIC_BPM) == version
    assert bronze_sequence_numbers(spark, resources) == list(range(100))


def test_a_recreated_topic_fails_the_stream_unless_told_to_resume_at_the_log_start(
    broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    resources["kafka"].create_topic(TOPIC_BPM, partitions=1)
    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(0, 50))
    materialize_bpm(resources)
    empty(broker.bootstrap_servers)  # the topic deleted and made again: its records are lost
    resources["kafka"].create_topic(TOPIC_BPM, partitions=1)
    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(50, 5))
    with pytest.raises(Exception, match="at offset 50 but the log now ends at 5"):
        materialize_bpm(resources)
    assert bronze_sequence_numbers(spark, resources) == list(range(50))

    # The documented option: resume from the earliest available offsets, saying so.
    resources["kafka"] = KafkaResource(
        bootstrap_servers=broker.bootstrap_servers, fail_on_data_loss=False
    )
    result = materialize_bpm(resources)
    assert bronze_sequence_numbers(spark, resources) == list(range(55))
    metadata = result.asset_materializations_for_node("bronze__bpm")[0].metadata
    assert metadata["kafka/data_loss"].value == {
        "bpm-0": {"checkpoint_offset": 50, "resumed_at": 0, "records_lost": None}
    }
    assert metadata["rows_written"].value == 5


def test_materialization_reports_rows_offsets_and_version(
    broker: EmbeddedBroker, resources: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    resources["kafka"].create_topic(TOPIC_BPM, partitions=2)
    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(0, 600))
    first = materialize_bpm(resources).asset_materializations_for_node("bronze__bpm")[0]
    ends = resources["kafka"].end_offsets([TOPIC_BPM])
    expected_offsets = {TOPIC_BPM: {str(p): end for (_, p), end in ends.items()}}
    assert sum(ends.values()) == 600
    assert first.metadata["end_offsets"].value == expected_offsets
    assert first.metadata["rows_written"].value == 600
    assert first.metadata["delta_version"].value == "0"  # one batch: the table's first commit
    assert first.metadata["table_uri"].value == resources["lake"].table_uri(BRONZE, TOPIC_BPM)

    def no_stream(*args: Any) -> None:
        raise AssertionError("a run with nothing new started the stream")

    with monkeypatch.context() as patched:  # nothing new: no stream, no commit, same version
        patched.setattr(bronze_assets, "run_available_now", no_stream)
        again = materialize_bpm(resources).asset_materializations_for_node("bronze__bpm")[0]
    assert again.metadata["rows_written"].value == 0
    assert again.metadata["delta_version"].value == "0"
    assert again.metadata["dagster/row_count"].value == 600

    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(600, 1))  # one new record: a stream
    third = materialize_bpm(resources).asset_materializations_for_node("bronze__bpm")[0]
    assert third.metadata["rows_written"].value == 1
    assert third.metadata["dagster/row_count"].value == 601


def test_a_lake_filled_from_one_cluster_refuses_another(
    broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    resources["kafka"].create_topic(TOPIC_BPM, partitions=1)
    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(0, 3))
    materialize_bpm(resources)
    checkpoint = StreamPosition(resources["lake"], TOPIC_BPM).checkpoint
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    this_cluster = admin.describe_cluster()["cluster_id"]
    admin.close()
    assert recorded_cluster(checkpoint) == this_cluster

    # As a lake filled from another broker: its offsets (3) would skip this cluster's records.
    record_cluster(checkpoint, "another-cluster")
    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(3, 2))
    result = materialize_bpm(resources, raise_on_error=False)
    assert not result.success
    failure = str(result.get_step_failure_events()[0].step_failure_data.error)
    assert "read from the Kafka cluster another-cluster" in failure
    assert f"is the cluster {this_cluster}" in failure
    assert "LAKEHOUSE_ROOT to a new folder" in failure
    assert bronze_sequence_numbers(spark, resources) == [0, 1, 2]  # nothing read
