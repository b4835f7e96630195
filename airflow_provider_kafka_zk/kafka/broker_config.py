"""Which value a broker really runs with for a setting: its server.properties, or a dynamic broker
config in ZooKeeper (``/config/brokers/<id>``, ``/config/brokers/<default>``) when -- and only when --
Kafka allows that key dynamically at the broker's release.

Kafka's rules (``core/src/main/scala/kafka/server/DynamicBrokerConfig.scala``, 1.1.0 .. 3.9; KIP-226):

* ``updateCurrentConfig`` overrides the static config with ``dynamicDefaultConfigs`` and then with
  ``dynamicBrokerConfigs``: per-broker beats the cluster default beats server.properties beats
  Kafka's default.
* ``fromPersistentProps`` drops keys outside ``AllDynamicConfigs`` with the ERROR "Non-dynamic
  configs configured in ZooKeeper will be ignored", and values that do not parse ("... contains
  invalid values in: ..., these configs will be ignored"); the broker runs with the rest.
* ``log.segment.delete.delay.ms`` is dynamic from 1.1.0 (``DynamicLogConfig.ReconfigurableConfigs``
  = the broker synonyms of the topic configs, ``file.delete.delay.ms`` -> ``log.segment.delete.delay.ms``
  in ``LogConfig.TopicConfigSynonyms``), per broker or cluster-wide; ``LogManager.deleteLogs`` reads
  ``currentDefaultConfig.fileDeleteDelayMs`` at every run, so the current value applies.
* ``auto.leader.rebalance.enable``, ``leader.imbalance.per.broker.percentage`` and
  ``leader.imbalance.check.interval.seconds`` are in no ``ReconfigurableConfigs`` set at any
  release 1.1 .. 3.9: static ``val``s of ``KafkaConfig`` read by the controller
  (``KafkaController.onControllerFailover`` / ``processAutoPreferredReplicaLeaderElection``), so a
  value for them in ZooKeeper is ignored by the broker, and said so here.
* Before 1.1 there are no dynamic broker configs at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import KafkaFormatError
from .logdir import parse_java_int
from .versions import KafkaVersion

DYNAMIC_BROKER_CONFIGS_SINCE = KafkaVersion(1, 1)
LOG_SEGMENT_DELETE_DELAY_MS = "log.segment.delete.delay.ms"
AUTO_LEADER_REBALANCE_ENABLE = "auto.leader.rebalance.enable"
LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = "leader.imbalance.per.broker.percentage"
LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS = "leader.imbalance.check.interval.seconds"

#: key -> (type, Kafka's default) as ``KafkaConfig`` defines them (3.3.1 ``Defaults``; unchanged 1.0 .. 3.9).
KNOWN_KEYS: dict[str, tuple[str, Any]] = {
    LOG_SEGMENT_DELETE_DELAY_MS: ("long", 60_000),
    AUTO_LEADER_REBALANCE_ENABLE: ("bool", True),
    LEADER_IMBALANCE_PER_BROKER_PERCENTAGE: ("int", 10),
    LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS: ("long", 300),
}
#: The known keys Kafka lets a broker take from ZooKeeper (``DynamicBrokerConfig.AllDynamicConfigs``).
DYNAMIC_KEYS = frozenset({LOG_SEGMENT_DELETE_DELAY_MS})

_JAVA_TRIM = "".join(chr(c) for c in range(33))  # String.trim(): every char <= ' '


@dataclass(frozen=True)
class EffectiveSetting:
    """One setting as the broker runs with it, where that value came from, and what Kafka ignored."""

    key: str
    value: Any
    source: str
    ignored: tuple[str, ...] = ()

    def describe(self) -> str:
        text = f"{self.key}={_text(self.value)} ({self.source})"
        if self.ignored:
            text += "; " + "; ".join(self.ignored)
        return text


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_value(key: str, text: str, source: str) -> Any:
    """A config value as ``ConfigDef.parseType`` reads it (trimmed; booleans true/false in any case).

    :raises ValueError: the broker would not accept it.
    """
    kind = KNOWN_KEYS[key][0]
    trimmed = text.strip(_JAVA_TRIM)
    if kind == "bool":
        if trimmed.lower() not in ("true", "false"):
            raise ValueError(f"{source}: {key}={text!r} is not true/false")
        return trimmed.lower() == "true"
    try:
        return parse_java_int(trimmed, source, key, bits=32 if kind == "int" else 64)
    except KafkaFormatError as exc:
        raise ValueError(str(exc)) from None


def effective_setting(
    key: str,
    *,
    broker_id: int,
    static_value: Any = None,
    static_source: str = "server.properties",
    dynamic_broker: Mapping[str, str] | None = None,
    dynamic_default: Mapping[str, str] | None = None,
    release: str | KafkaVersion | None = None,
) -> EffectiveSetting:
    """The value broker ``broker_id`` uses for ``key`` (one of :data:`KNOWN_KEYS`).

    :param static_value: the value from its server.properties (None: not set there; Kafka's default).
    :param static_source: how to name where ``static_value`` came from.
    :param dynamic_broker: ``/config/brokers/<broker_id>``'s config (None: no znode).
    :param dynamic_default: ``/config/brokers/<default>``'s config (None: no znode).
    :param release: the broker's Kafka release (None: unknown, taken as 1.1+ when ZooKeeper holds a value).
    """
    if key not in KNOWN_KEYS:
        raise ValueError(f"unknown broker setting {key!r}")
    if static_value is None:
        value, source = KNOWN_KEYS[key][1], "Kafka default"
    else:
        value, source = static_value, static_source
    version = _release(release)
    ignored: list[str] = []
    layers = (
        (dynamic_default, "/config/brokers/<default>"),
        (dynamic_broker, f"/config/brokers/{broker_id}"),
    )
    for config, path in layers:  # the default first: the per-broker value wins (updateCurrentConfig)
        if not config or key not in config:
            continue
        if key not in DYNAMIC_KEYS:
            ignored.append(
                f"{path} sets {key}={config[key]}, which the broker ignores (not a dynamic config: "
                "'Non-dynamic configs configured in ZooKeeper will be ignored')"
            )
            continue
        if version is not None and version < DYNAMIC_BROKER_CONFIGS_SINCE:
            ignored.append(
                f"{path} sets {key}={config[key]}, ignored by Kafka {version} (dynamic configs: 1.1+)"
            )
            continue
        try:
            value, source = parse_value(key, config[key], path), f"dynamic broker config {path}"
        except ValueError:
            ignored.append(f"{path} sets {key}={config[key]!r}, which the broker ignores (invalid value)")
    return EffectiveSetting(key, value, source, tuple(ignored))


def _release(release: str | KafkaVersion | None) -> KafkaVersion | None:
    if not isinstance(release, str):
        return release
    try:
        return KafkaVersion.parse(release)
    except KafkaFormatError:
        return None  # an unreadable release: as unknown


def broker_dynamic_configs(
    configs: Mapping[str, Mapping[str, str]], broker_id: int
) -> tuple[Mapping[str, str] | None, Mapping[str, str] | None]:
    """(``/config/brokers/<id>``, ``/config/brokers/<default>``) from the entity -> config map."""
    return configs.get(str(broker_id)), configs.get("<default>")
