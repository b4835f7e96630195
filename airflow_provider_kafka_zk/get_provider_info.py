"""Provider metadata read by Airflow's ProvidersManager (entry point ``apache_airflow_provider``).

Connection form fields are declared here (``conn-fields``, Airflow 3.2+), so the UI can render the
``kafka_zookeeper`` form without importing the hook.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_kafka_zk import __version__

_INTEGRATION = "Apache Kafka (ZooKeeper mode)"


def _field(label: str, schema: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    field: dict[str, Any] = {"label": label, "schema": schema}
    if description:
        field["description"] = description
    return field


def _connection_type(conn_type: str, hook_class: str, hook_name: str) -> dict[str, Any]:
    """One ``connection-types`` entry. ``kafkazookeeper`` is the type (no ``_``: see
    ``hooks.zookeeper.CONN_TYPE``); ``kafka_zookeeper``, its first name, stays for saved connections."""
    return {
        "connection-type": conn_type,
        "hook-class-name": hook_class,
        "hook-name": hook_name,
        "conn-fields": {
            "chroot": _field(
                "Kafka chroot",
                {"type": ["string", "null"], "pattern": "^(/[^/]+)*$"},
                "ZooKeeper path Kafka lives under, e.g. /kafka_cluster_01 (empty: the root).",
            ),
            "auth_scheme": _field(
                "Authentication",
                {"type": ["string", "null"], "enum": ["none", "digest", "sasl"], "default": "none"},
                "digest: login/password as ZooKeeper digest auth; sasl: SASL (DIGEST-MD5 or GSSAPI).",
            ),
            "sasl_mechanism": _field(
                "SASL mechanism",
                {
                    "type": ["string", "null"],
                    "enum": ["DIGEST-MD5", "GSSAPI"],
                    "default": "DIGEST-MD5",
                },
            ),
            "sasl_service": _field(
                "SASL service name",
                {"type": ["string", "null"], "default": "zookeeper"},
                "GSSAPI: the service of the ensemble's principal (zookeeper/<host>@REALM).",
            ),
            "use_ssl": _field("Use TLS", {"type": ["boolean", "null"], "default": False}),
            "verify_certs": _field(
                "Verify server certificate", {"type": ["boolean", "null"], "default": True}
            ),
            "check_hostname": _field(
                "Check server host name",
                {"type": ["boolean", "null"], "default": False},
                "TLS: the server certificate must name the host connected to (SAN).",
            ),
            "ca_file": _field("CA bundle file", {"type": ["string", "null"]}),
            "cert_file": _field("Client certificate file", {"type": ["string", "null"]}),
            "key_file": _field("Client key file", {"type": ["string", "null"]}),
            "key_password": _field("Client key password", {"type": ["string", "null"], "format": "password"}),
            "session_timeout": _field(
                "Session timeout (s)",
                {"type": ["number", "null"], "default": 30, "minimum": 4, "maximum": 600},
            ),
            "connect_timeout": _field(
                "Connect timeout (s)",
                {"type": ["number", "null"], "default": 15, "minimum": 1, "maximum": 600},
            ),
            "jute_maxbuffer": _field(
                "Server jute.maxbuffer (bytes)",
                {"type": ["integer", "null"], "minimum": 4096},
                "The ensemble's -Djute.maxbuffer; empty: [kafka_zk] jute_maxbuffer, else 1048575.",
            ),
            "read_only": _field(
                "Read-only",
                {"type": ["boolean", "null"], "default": False},
                "Refuse every ZooKeeper write through this connection (audit-only use).",
            ),
        },
        "ui-field-behaviour": {
            "hidden-fields": ["schema", "extra"],
            "relabeling": {
                "host": "ZooKeeper hosts",
                "port": "Default port",
                "login": "Digest/SASL user",
                "password": "Digest/SASL password",
            },
            "placeholders": {
                "host": "zk1.example.com:2181,zk2.example.com:2181,zk3.example.com:2181",
                "port": "2181",
            },
        },
    }


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-kafka-zk",
        "name": "Kafka ZooKeeper-mode cluster care",
        "description": (
            "Operators and DAGs that keep ZooKeeper-mode Kafka clusters (0.11 ... 3.9) healthy: "
            "ZooKeeper snapshots, topicId audits, RF=1 drains, topic-deletion verification."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://kafka.apache.org/documentation/#zk",
                "tags": ["service"],
            }
        ],
        "hooks": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "airflow_provider_kafka_zk.hooks.zookeeper",
                    "airflow_provider_kafka_zk.hooks.broker_host",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "airflow_provider_kafka_zk.operators.snapshot",
                    "airflow_provider_kafka_zk.operators.inventory",
                    "airflow_provider_kafka_zk.operators.deletion",
                    "airflow_provider_kafka_zk.operators.drain",
                    "airflow_provider_kafka_zk.operators.post_maintenance",
                    "airflow_provider_kafka_zk.operators.log_scan",
                    "airflow_provider_kafka_zk.operators.topic_id_repair",
                    "airflow_provider_kafka_zk.operators.audit",
                    "airflow_provider_kafka_zk.operators.undo",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "airflow_provider_kafka_zk.triggers.deletion",
                    "airflow_provider_kafka_zk.triggers.reassignment",
                    "airflow_provider_kafka_zk.triggers.leader_election",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_provider_kafka_zk.sensors.reassignment"],
            }
        ],
        "config": {
            "kafka_zk": {
                "description": "Which Kafka clusters the provider's DAGs run for, and where their artefacts go.",
                "options": {
                    "clusters_file": {
                        "description": (
                            "The cluster file (TOML: [defaults] and one [clusters.<name>] table per cluster). "
                            "Empty: kafka_zk_clusters.toml in the DAGs folder. $KAFKA_ZK_CLUSTERS_FILE wins. "
                            "No file, or none listed: no DAG is scheduled."
                        ),
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "/etc/airflow/kafka_zk_clusters.toml",
                        "default": "",
                    },
                    "artefacts_base": {
                        "description": "Local directory or fsspec URL; empty means $AIRFLOW_HOME/kafka-zk-artefacts.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "s3://kafka-artefacts",
                        "default": "",
                    },
                    "artefacts_conn_id": {
                        "description": (
                            "Airflow connection of a remote artefacts base (an aws connection for s3://..., "
                            "an sftp connection for sftp://...), used through ObjectStoragePath by every "
                            "operator that reads or writes artefacts (their artefacts_conn_id default) and "
                            "handed to the Spark jobs as a private file; empty: the store's default "
                            "credentials. Local paths ignore it."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "aws_artefacts",
                        "default": "",
                    },
                    "default_kafka_zookeeper_conn_id": {
                        "description": (
                            "kafka_zookeeper connection of a manual run when no cluster file names the cluster "
                            "(clusters in the file default to kafka_zk_<name>)."
                        ),
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "zk_prod",
                        "default": "kafka_zookeeper_default",
                    },
                    "default_ssh_conn_id": {
                        "description": (
                            "ssh connection to the broker hosts of a manual run when no cluster file names the "
                            "cluster (clusters in the file default to kafka_zk_<name>_ssh)."
                        ),
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "kafka_hosts",
                        "default": "ssh_default",
                    },
                    "default_fail_on": {
                        "description": (
                            "Severity at which the daily hygiene gate fails (critical, error, warning, info), "
                            "unless the cluster file says otherwise."
                        ),
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "error",
                        "default": "critical",
                    },
                    "notify_parse_check": {
                        "description": (
                            "What the daily DAG file checks of each cluster's notify channels when it is "
                            "parsed (an unusable channel is an import error of the file): 'connections' "
                            "(the provider importable and the connection present with what the hook needs; "
                            "one metadata-DB or secrets-backend lookup per channel per parse, cached by "
                            "[secrets] use_cache), 'providers' (the providers only; the run's notify_check "
                            "task checks the connections), 'off'."
                        ),
                        "version_added": "0.3.0",
                        "type": "string",
                        "example": "providers",
                        "default": "connections",
                    },
                    "lease_ttl_s": {
                        "description": (
                            "Seconds a cluster's maintenance lease counts without renewal. A running "
                            "mutation renews it at every step and while it waits; a run that outlived it "
                            "stops before its next write. Keep it above the longest wait nothing renews "
                            "(a drain's deferred batch wait)."
                        ),
                        "version_added": "0.3.0",
                        "type": "float",
                        "example": "3600",
                        "default": "43200",
                    },
                    "jute_maxbuffer": {
                        "description": (
                            "The ensemble's -Djute.maxbuffer in bytes: multi-op writes are cut into "
                            "requests under it. A connection's jute_maxbuffer field wins."
                        ),
                        "version_added": "0.3.0",
                        "type": "integer",
                        "example": "4194304",
                        "default": "1048575",
                    },
                    "metrics_pushgateway_url": {
                        "description": (
                            "A Prometheus Pushgateway the daily and maintenance runs push their metrics to "
                            "(empty: none). A cluster file's metrics_pushgateway_url wins; metrics = false "
                            "there turns a cluster's metrics off."
                        ),
                        "version_added": "0.3.0",
                        "type": "string",
                        "example": "http://pushgateway.example.com:9091",
                        "default": "",
                    },
                    "metrics_airflow": {
                        "description": (
                            "Also record the metrics through Airflow's own metrics layer (StatsD or "
                            "OpenTelemetry, as [metrics] statsd_on / otel_on say). A cluster file's "
                            "metrics_airflow wins."
                        ),
                        "version_added": "0.3.0",
                        "type": "boolean",
                        "example": "True",
                        "default": "False",
                    },
                    "metrics_timeout_s": {
                        "description": (
                            "Seconds one Pushgateway push may take; a receiver that is down is logged, "
                            "counted and skipped for a minute, never failing or holding up the task."
                        ),
                        "version_added": "0.3.0",
                        "type": "float",
                        "example": "5",
                        "default": "2",
                    },
                },
            }
        },
        "connection-types": [
            _connection_type(
                "kafkazookeeper",
                "airflow_provider_kafka_zk.hooks.zookeeper.KafkaZooKeeperHook",
                "Kafka ZooKeeper",
            ),
            _connection_type(
                "kafka_zookeeper",
                "airflow_provider_kafka_zk.hooks.zookeeper.LegacyKafkaZooKeeperHook",
                "Kafka ZooKeeper (old type name kafka_zookeeper)",
            ),
        ],
    }
