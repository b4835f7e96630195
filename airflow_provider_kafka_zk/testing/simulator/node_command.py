"""A simulated node host's command (what ``sudo systemctl restart kafka`` or ``kafka-storage.sh format``
is on a real one), for the KRaft migration DAG's command templates.

    python -m airflow_provider_kafka_zk.testing.simulator.node_command --dir DIR --action ACTION --node N
        [--config PATH] [--cluster-id ID] [--timeout S]

ACTION is ``restart-broker``, ``format``, ``start``, ``stop`` or ``restart`` (a controller). Run on the
"host" over SSH. It leaves a request in ``DIR`` for :class:`~.migration_hosts.MigrationRuntime` and
returns once the runtime answered -- like ``systemctl``, which returns when the unit started or
stopped, not when the node rejoined -- with the runtime's exit status and message (a format of a
formatted directory fails, as ``kafka-storage format`` does). Exit 1 when no answer came in time.
Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument(
        "--action", required=True, choices=("restart-broker", "format", "start", "stop", "restart")
    )
    parser.add_argument("--node", type=int, required=True)
    parser.add_argument("--config", default=None)
    parser.add_argument("--cluster-id", default=None)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    nonce = uuid.uuid4().hex
    request = args.dir / f"{nonce}.request"
    done = args.dir / f"{nonce}.done"
    temporary = args.dir / f".{nonce}.tmp"
    temporary.write_text(
        json.dumps(
            {"action": args.action, "node": args.node, "config": args.config, "cluster_id": args.cluster_id}
        )
    )
    os.replace(temporary, request)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if done.exists():
            answer = json.loads(done.read_text())
            stream = sys.stdout if answer.get("status", 1) == 0 else sys.stderr
            print(answer.get("message", ""), file=stream)
            return int(answer.get("status", 1))
        time.sleep(0.05)
    print(f"node {args.node}: no answer to {args.action} within {args.timeout}s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
