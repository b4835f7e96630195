"""The fleet benchmark's broker side, recorded once and then replayed (``--modes scheduler-replayed``).

On a real deployment each broker host walks its own disks: the inventory's remote half runs on the
brokers' CPUs, not on the Airflow machine's. The benchmark's simulated brokers all live on this
machine, so their walks (sshd and ``python3``, some 0.9 CPU s a broker of 12,000 directories) share
its two cores with Airflow. This script, set as the ``command=`` of the test sshd's authorized key,
charges the Airflow machine only what it pays in production:

* ``record <folder>``: runs the session's real command (the inventory script) and copies its output
  to ``<folder>/<server address>.jsonl`` as it passes;
* ``replay <folder>``: for the inventory command, reads what the Airflow side sends (the script, its
  parameters, later the log dirs) and answers with that broker's recording, in the same two parts
  (up to ``await_log_dirs``, then the walk); SSH, the stream and everything on the Airflow side stay
  real.

Any other command of a session (another task's) runs as it is. Stdlib only: sshd runs it with the
host's ``python3``.
"""

import os
import re
import subprocess
import sys

INVENTORY_MARK = "<kafka-broker-inventory>"  # in the bootstrap of BrokerHostHook.remote_command
AWAIT = b'{"t":"await_log_dirs"'


def record(command: str, path: str) -> int:
    with open(path, "wb") as copy:
        process = subprocess.Popen(["/bin/sh", "-c", command], stdout=subprocess.PIPE)
        out = sys.stdout.buffer
        for chunk in iter(lambda: process.stdout.read1(1 << 16), b""):
            copy.write(chunk)
            out.write(chunk)
            out.flush()  # the protocol is a dialogue: the Airflow side answers await_log_dirs
        return process.wait()


def replay(command: str, path: str) -> int:
    match = re.search(r"' (\d+); fi; ", command)
    if match is None:
        sys.stdout.write('{"t":"fatal","kind":"replay","detail":"no script length in the command"}\n')
        return 2
    with open(path, "rb") as handle:
        recorded = handle.read()
    cut = recorded.index(b"\n", recorded.index(AWAIT)) + 1
    stdin, out = sys.stdin.buffer, sys.stdout.buffer
    stdin.read(int(match.group(1)))  # the script
    stdin.readline()  # its parameters
    out.write(recorded[:cut])
    out.flush()
    stdin.readline()  # the log dirs to walk
    out.write(recorded[cut:])
    out.flush()
    return 0


def main() -> int:
    mode, folder = sys.argv[1], sys.argv[2]
    command = os.environ.get("SSH_ORIGINAL_COMMAND", "")
    if INVENTORY_MARK not in command:
        os.execv("/bin/sh", ["sh", "-c", command] if command else ["sh"])  # noqa: S606 - the session as asked
    server_address = os.environ["SSH_CONNECTION"].split()[2]
    path = os.path.join(folder, server_address + ".jsonl")
    return record(command, path) if mode == "record" else replay(command, path)


if __name__ == "__main__":
    sys.exit(main())
