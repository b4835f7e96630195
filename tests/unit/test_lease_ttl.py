"""The maintenance lease's TTL: ``[kafka_zk] lease_ttl_s`` or the operator's argument, checked before any I/O."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_zk.maintenance.session import (
    DEFAULT_LEASE_TTL_S,
    SafetyFlagError,
    default_lease_ttl_s,
    lease_ttl_seconds,
)


def test_the_ttl_comes_from_the_provider_config_section(monkeypatch):
    monkeypatch.delenv("AIRFLOW__KAFKA_ZK__LEASE_TTL_S", raising=False)
    assert default_lease_ttl_s() == DEFAULT_LEASE_TTL_S
    monkeypatch.setenv("AIRFLOW__KAFKA_ZK__LEASE_TTL_S", "900")
    assert default_lease_ttl_s() == 900.0
    monkeypatch.setenv("AIRFLOW__KAFKA_ZK__LEASE_TTL_S", "soon")
    with pytest.raises(SafetyFlagError, match=r"\[kafka_zk\] lease_ttl_s must be a number of seconds"):
        default_lease_ttl_s()


@pytest.mark.parametrize("value", ["", None, "0", -5, 3, True, "inf", "nan", "{{ params.ttl }}"])
def test_a_ttl_that_is_not_a_usable_number_of_seconds_refuses(value):
    with pytest.raises(SafetyFlagError, match="lease_ttl_s"):
        lease_ttl_seconds(value)


def test_a_ttl_as_rendered_text_is_accepted():
    assert lease_ttl_seconds("600") == 600.0 and lease_ttl_seconds(10) == 10.0
