#!/usr/bin/env bash
# The main job on the built-in demo cluster, from nothing: set-up (idempotent), then start real
# ZooKeeper and sshd on loopback, build the simulated incident cluster, show what it holds, then run
# the daily hygiene DAG on it (airflow dags test, audit on Spark), print the findings summary, and
# end with the topicId repair plan (a dry run of kafka_zk_topic_id_repair) for the topics it found.
# Real runs (--repair, --maintenance) wait for a person's approval of their plan: the demo starts an
# airflow api-server on its Airflow home, prints the plan and its hash, and approves it over REST.
# --keep-running then leaves it all up, plus a drainable cluster (demo_maintenance), and prints the
# airflow commands to try the drain on it and the PID that stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
exec python -m airflow_provider_kafka_zk.testing.demo --run-dag "$@"
