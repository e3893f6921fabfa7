"""The embedded broker (Apache Kafka): answers, keeps its records across a restart on the same
folder, and fails clearly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from lakehouse_tools import broker as broker_module
from lakehouse_tools.broker import EmbeddedBroker, EmbeddedBrokerError
from lakehouse_tools.sample_data import Message, produce
from resources.kafka import KafkaResource


@pytest.mark.services  # starts a broker of its own
def test_records_outlive_a_restart_on_the_same_folder(tmp_path: Path) -> None:
    data = tmp_path / "kafka"
    with EmbeddedBroker(data_dir=data) as first:
        produce(
            first.bootstrap_servers, [Message("bpm", str(i), f'{{"n": {i}}}') for i in range(7)]
        )
        log = first.log_path
        assert log is not None and log.exists()
        process = first._process
    assert process is not None and process.poll() is not None
    assert not log.exists()  # removed after a clean stop

    with EmbeddedBroker(data_dir=data) as again:  # another port: clients follow the new address
        admin = KafkaAdminClient(bootstrap_servers=again.bootstrap_servers)
        assert "bpm" in admin.list_topics()
        admin.close()
        ends = KafkaResource(bootstrap_servers=again.bootstrap_servers).end_offsets(["bpm"])
    assert ends == {("bpm", 0): 7}


@pytest.mark.services  # starts a broker of its own
def test_a_temporary_broker_leaves_no_folder_behind() -> None:
    broker = EmbeddedBroker()
    try:
        broker.start()
        folder = broker._temporary
        assert folder is not None and (folder / "log" / "meta.properties").is_file()
    finally:
        broker.stop()
    assert not folder.exists()


def test_taken_port_is_a_clear_error(session_broker: EmbeddedBroker) -> None:
    with pytest.raises(EmbeddedBrokerError, match="already in use"):
        EmbeddedBroker(port=session_broker.port).start()


def test_missing_jars_are_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(broker_module, "KAFKA_JARS_DIR", tmp_path)
    with pytest.raises(EmbeddedBrokerError, match="lakehouse jars"):
        EmbeddedBroker().start()


def test_the_log_is_kept_when_the_broker_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_module, "SERVER_CLASS", "no.such.Kafka")
    with pytest.raises(EmbeddedBrokerError, match="exited with code 1") as failure:
        EmbeddedBroker().start()
    kept = re.search(r"Its output \((.+)\)", str(failure.value))
    assert kept and "no.such.Kafka" in Path(kept.group(1)).read_text()
    Path(kept.group(1)).unlink()
