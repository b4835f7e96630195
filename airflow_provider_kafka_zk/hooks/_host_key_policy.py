"""What the broker-host hooks trust as host keys, without paramiko (imported by ``broker_host`` at
DAG-parse time and by ``_strict_ssh`` when a host is connected)."""

from __future__ import annotations

SYSTEM_KNOWN_HOSTS: tuple[str, ...] = ("~/.ssh/known_hosts", "/etc/ssh/ssh_known_hosts")


class HostKeyPolicyError(ValueError):
    """The SSH connection asks to skip host-key checks, which this hook never does."""
