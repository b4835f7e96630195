"""A simulated broker host's restart command (what ``sudo systemctl restart kafka`` is on a real one).

    python -m airflow_provider_kafka_zk.testing.simulator.restart --dir DIR --broker N [--timeout S]

Run on the "broker host" over SSH. It asks the simulator's :class:`~.runtime.ClusterRuntime` to
restart broker N (a request file in ``DIR``) and returns once the runtime says the broker was
started again -- like ``systemctl restart``, which returns when the unit started, not when the
broker rejoined the ISR. Exit 1 when no answer came within the timeout. Stdlib only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--broker", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    nonce = uuid.uuid4().hex
    request = args.dir / f"{args.broker}.{nonce}.request"
    done = args.dir / f"{args.broker}.{nonce}.done"
    temporary = args.dir / f".{args.broker}.{nonce}.tmp"
    temporary.write_text(str(time.time()))
    os.replace(temporary, request)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if done.exists():
            print(f"kafka (broker {args.broker}) restarted: {done.read_text().strip()}")
            return 0
        time.sleep(0.05)
    print(f"broker {args.broker}: no restart confirmation within {args.timeout}s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
