#!/usr/bin/env bash
# The whole test suite, from nothing: set-up (idempotent), lint, then unit + integration tests
# against real local services (ZooKeeper, sshd, Spark, Airflow). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
echo "[test] ruff" >&2
ruff check .
ruff format --check .
echo "[test] pytest" >&2
# Two workers (KAFKA_ZK_TEST_WORKERS; 0 runs in this process): a test module per worker at a time,
# the production modules together in one (tests/conftest.py groups them)
workers="${KAFKA_ZK_TEST_WORKERS:-2}"
if [ "$workers" = 0 ]; then
  exec python -m pytest "$@"
fi
exec python -m pytest -n "$workers" --dist loadgroup "$@"
