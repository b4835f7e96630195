#!/usr/bin/env bash
# Regenerate constraints.txt from a clean virtualenv holding only this package's dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check '.[spark,test]'
{
  echo "# Pinned from a clean install of this package's dependencies (Python 3.11, Debian 12), because"
  echo "# Airflow's own constraint files are not reachable here. Regenerate: scripts/update-constraints.sh"
  "$tmp/venv/bin/pip" freeze --exclude airflow-provider-kafka-zk
} > constraints.txt
