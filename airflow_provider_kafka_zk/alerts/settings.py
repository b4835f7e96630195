"""The ``notify`` table of the cluster file: where a cluster's alerts go and when they page.

Plain data and validation, no Airflow: :func:`parse_notify` runs when the cluster file is read, so a
typo (an unknown kind, an e-mail without ``to``) is an error naming the key, never an alert that goes
nowhere. Whether the channel can really deliver (its provider installed, its connection usable) is
:mod:`airflow_provider_kafka_zk.alerts.checks`.

Accepted forms::

    notify = { kind = "smtp", to = ["oncall@example.com"] }                  # one channel
    notify = { channels = [ { kind = "smtp", to = "oncall@example.com" },
                            { kind = "slack", slack_webhook_conn_id = "slack_kafka" } ],
               page_on = "new_or_worse" }                                      # several
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

KINDS = ("log", "smtp", "slack")
PAGE_ON = ("new_or_worse", "every_run")
"""``new_or_worse`` (default): a run pages only for an incident the previous runs did not page, or
one that got worse; ``every_run``: every failed run pages with all its incidents."""

PROVIDERS = {
    "smtp": ("airflow.providers.smtp.hooks.smtp", "apache-airflow-providers-smtp"),
    "slack": ("airflow.providers.slack.hooks.slack_webhook", "apache-airflow-providers-slack"),
}
"""kind -> (module the channel needs, the distribution that ships it)."""

_CHANNEL_KEYS = {
    "log": set(),
    "smtp": {"to", "cc", "smtp_conn_id", "from_email"},
    "slack": {"slack_webhook_conn_id"},
}
_ALIASES = {"slack_conn_id": "slack_webhook_conn_id"}


class NotifyConfigError(ValueError):
    """The ``notify`` table is malformed; the message names the key (``clusters.<name>.notify.to``)."""


@dataclass(frozen=True)
class Channel:
    """One place an alert goes.

    :param kind: ``log`` (the task log only), ``smtp`` (an HTML e-mail), ``slack`` (an incoming webhook).
    :param to: e-mail recipients (smtp).
    :param cc: e-mail copy recipients (smtp).
    :param conn_id: the Airflow connection (``smtp``: type smtp; ``slack``: type slackwebhook).
    :param from_email: the sender, when the SMTP connection's ``from_email`` extra is not to be used.
    """

    kind: str
    to: tuple[str, ...] = ()
    cc: tuple[str, ...] = ()
    conn_id: str | None = None
    from_email: str | None = None

    @property
    def name(self) -> str:
        """How logs and records name the channel: ``smtp:smtp_default``, ``slack:slack_kafka``, ``log``."""
        return f"{self.kind}:{self.conn_id}" if self.conn_id else self.kind

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "to": list(self.to),
            "cc": list(self.cc),
            "conn_id": self.conn_id,
            "from_email": self.from_email,
        }


@dataclass(frozen=True)
class NotifySettings:
    """A cluster's alerting: its channels and when a run pages.

    :param channels: where alerts go (``log`` alone: nowhere but the task log).
    :param page_on: one of :data:`PAGE_ON`.
    """

    channels: tuple[Channel, ...] = field(default_factory=lambda: (Channel("log"),))
    page_on: str = "new_or_worse"

    @property
    def delivers(self) -> bool:
        """Whether any channel reaches a person (not only the log)."""
        return any(c.kind != "log" for c in self.channels)

    def to_dict(self) -> dict[str, Any]:
        return {"channels": [c.to_dict() for c in self.channels], "page_on": self.page_on}


def _addresses(value: Any, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Sequence) or isinstance(items, bytes):
        raise NotifyConfigError(f"{where} must be an e-mail address or a list of them")
    out = []
    for item in items:
        if not isinstance(item, str) or "@" not in item or any(c.isspace() for c in item.strip()):
            raise NotifyConfigError(f"{where}: {item!r} is not an e-mail address")
        out.append(item.strip())
    return tuple(out)


def _channel(table: Any, where: str) -> Channel:
    if not isinstance(table, Mapping):
        raise NotifyConfigError(f'{where} must be a table such as {{ kind = "smtp", to = [...] }}')
    table = {_ALIASES.get(k, k): v for k, v in table.items()}
    kind = str(table.get("kind", "")).lower()
    if kind not in KINDS:
        raise NotifyConfigError(f"{where}.kind must be one of {', '.join(KINDS)}, not {table.get('kind')!r}")
    if kind == "slack" and "channel" in table:
        raise NotifyConfigError(
            f"{where}.channel: a Slack incoming webhook always posts to the channel it was created for; "
            "remove 'channel' and give the webhook's connection as slack_webhook_conn_id"
        )
    unknown = sorted(set(table) - {"kind"} - _CHANNEL_KEYS[kind])
    if unknown:
        allowed = ", ".join(sorted(_CHANNEL_KEYS[kind])) or "none"
        raise NotifyConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)} for kind {kind!r} (allowed: {allowed})"
        )
    for key in ("smtp_conn_id", "slack_webhook_conn_id", "from_email"):
        if key in table and (not isinstance(table[key], str) or not table[key].strip()):
            raise NotifyConfigError(f"{where}.{key} must be a non-empty string")
    if kind == "smtp":
        if "to" not in table:
            raise NotifyConfigError(f"{where}.to is required for kind 'smtp' (the on-call address)")
        to = _addresses(table["to"], f"{where}.to")
        if not to:
            raise NotifyConfigError(f"{where}.to names no address")
        from_email = table.get("from_email")
        if from_email is not None:
            _addresses(from_email, f"{where}.from_email")
        return Channel(
            "smtp",
            to=to,
            cc=_addresses(table.get("cc", []), f"{where}.cc"),
            conn_id=table.get("smtp_conn_id", "smtp_default"),
            from_email=from_email,
        )
    if kind == "slack":
        return Channel("slack", conn_id=table.get("slack_webhook_conn_id", "slack_default"))
    return Channel("log")


def parse_notify(value: Any, where: str = "notify") -> NotifySettings:
    """A validated :class:`NotifySettings` from the cluster file's ``notify`` value.

    :param value: the ``notify`` table (None or empty: the log only).
    :param where: how messages name the key, e.g. ``clusters.eu1.notify``.
    """
    if isinstance(value, NotifySettings):
        return value
    if value is None or value == {}:
        return NotifySettings()
    if not isinstance(value, Mapping):
        raise NotifyConfigError(
            f'{where} must be a table, e.g. {{ kind = "smtp", to = ["oncall@example.com"] }}'
        )
    page_on = str(value.get("page_on", "new_or_worse"))
    if page_on not in PAGE_ON:
        raise NotifyConfigError(f"{where}.page_on must be one of {', '.join(PAGE_ON)}, not {page_on!r}")
    if "channels" in value:
        extra = sorted(set(value) - {"channels", "page_on"})
        if extra:
            raise NotifyConfigError(
                f"{where}: with 'channels', only 'page_on' may stand beside it (not {', '.join(extra)})"
            )
        tables = value["channels"]
        if not isinstance(tables, Sequence) or isinstance(tables, str) or not tables:
            raise NotifyConfigError(f"{where}.channels must be a non-empty list of tables")
        channels = tuple(_channel(t, f"{where}.channels[{i}]") for i, t in enumerate(tables))
    else:
        channels = (_channel({k: v for k, v in value.items() if k != "page_on"}, where),)
    names = [c.name for c in channels]
    duplicates = sorted({n for n in names if names.count(n) > 1 and n != "log"})
    if duplicates and any(c.kind != "smtp" for c in channels if c.name in duplicates):
        raise NotifyConfigError(f"{where}: channel {duplicates[0]} is listed twice")
    return NotifySettings(channels=channels, page_on=page_on)
