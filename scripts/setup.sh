#!/usr/bin/env bash
# One-time (and idempotent, quick when done) set-up of everything the demo and the tests need on a
# fresh Debian 12 machine: Debian packages (JRE + ZooKeeper, sshd), a virtualenv in .venv with the
# pinned Python stack, and this package installed in editable mode.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv
# krb5-*: a real KDC for the Kerberos (GSSAPI) ZooKeeper tests; libkrb5-dev + gcc build the kerberos module.
# postgresql: the production-shape test harness runs Airflow's metadata DB on a private cluster of it.
# prometheus, prometheus-pushgateway: the metrics tests scrape and query real ones (private, free ports).
APT_PACKAGES=(openjdk-17-jre-headless zookeeper libslf4j-java openssh-server openssh-client chromium chromium-driver
  krb5-kdc krb5-admin-server krb5-user libkrb5-dev gcc postgresql prometheus prometheus-pushgateway)

log() { printf '[setup] %s\n' "$*" >&2; }

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian's postgresql package creates and may start a system cluster (port 5432); the tests run a
  # private one of their own (initdb on a free port), so stop what the install started.
  if [[ " ${missing[*]} " == *" postgresql "* ]] && command -v pg_lsclusters >/dev/null; then
    pg_lsclusters --no-header 2>/dev/null | awk '$4 == "online" {print $1, $2}' | while read -r version name; do
      $SUDO pg_ctlcluster "$version" "$name" stop || true
    done
  fi
  # Likewise Prometheus (9090) and the Pushgateway (9091), where the install started their services.
  for service in prometheus prometheus-pushgateway; do
    if [[ " ${missing[*]} " == *" $service "* ]] && [ -x "/etc/init.d/$service" ]; then
      $SUDO "/etc/init.d/$service" stop >/dev/null 2>&1 || true
    fi
  done
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  log "Python >= 3.11 is required (pyspark 4.3); found $("$PYTHON" --version 2>&1)"; exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV"
fi

# Re-run pip only when what it installs from changed (keeps the second run quick).
stamp=$VENV/.kafka-zk-setup-stamp
want=$(cat setup.cfg pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing Python packages (pinned by constraints.txt; about 4 minutes on a fresh machine)"
  # pip -q is silent for minutes: say every 30 s that it is still working and how far it got.
  ( start=$SECONDS
    while sleep 30; do
      log "pip still working: $((SECONDS - start)) s, $(ls -d "$VENV"/lib/python3*/site-packages/*.dist-info 2>/dev/null | wc -l) packages installed"
    done ) &
  heartbeat=$!
  trap 'kill "$heartbeat" 2>/dev/null || true' EXIT
  # apache-spark's provider pulls pyspark-client, which ships the same Python files as pyspark:
  # constraints.txt pins both to one release, so the files are the same whichever pip installs last
  # (never uninstall pyspark-client: it deletes pyspark's files). Checked below.
  "$VENV/bin/pip" install -q --disable-pip-version-check -c constraints.txt -e '.[spark,test]' 2>&1 \
    | grep -v "^WARNING: Location" || true
  kill "$heartbeat" 2>/dev/null || true
  echo "$want" > "$stamp"
fi
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md, pyspark, sys
if pyspark.__version__ != md.version("pyspark"):
    sys.exit(f"pyspark files are {pyspark.__version__} but the wheel is {md.version('pyspark')}")
PY
