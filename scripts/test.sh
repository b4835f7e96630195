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
exec python -m pytest "$@"
