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
# Two workers (KAFKA_ZK_TEST_WORKERS; 0 runs everything in this one process): a test module per
# worker at a time (tests/conftest.py groups them). Then the production modules (the `production`
# marker: one deployment with PostgreSQL, scheduler, triggerer, api-server) alone, as a deployment runs.
workers="${KAFKA_ZK_TEST_WORKERS:-2}"
if [ "$workers" = 0 ]; then
  exec python -m pytest "$@"
fi
status=0
python -m pytest -n "$workers" --dist loadgroup -m "not production" "$@" || status=$?
[ "$status" = 5 ] && status=0 # 5: the arguments selected no test here
rest=0
python -m pytest -m production "$@" || rest=$?
[ "$rest" = 5 ] && rest=0
[ "$status" != 0 ] && exit "$status"
exit "$rest"
