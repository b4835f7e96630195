"""Real local stand-ins for alert channels, bound to loopback: an SMTP server (aiosmtpd) that keeps
every message it receives, and an HTTP endpoint that answers as Slack's incoming webhook does
(``200 ok``) and keeps every body posted to it. Stopped when their ``with`` block ends."""

from __future__ import annotations

import email
import email.policy
import json
import threading
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from airflow_provider_kafka_zk.testing._process import free_port


@dataclass
class ReceivedMail:
    """One message as the server got it: envelope and the parsed message."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage

    def html(self) -> str:
        part = self.message.get_body(preferencelist=("html",))
        return part.get_content() if part is not None else ""


class SmtpSink:
    """An SMTP server on 127.0.0.1 (plain, no TLS, no auth) keeping what it receives in ``messages``."""

    def __init__(self) -> None:
        self.port = free_port("127.0.0.1")
        self.messages: list[ReceivedMail] = []
        self._lock = threading.Lock()
        self._controller: Any = None

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd handler
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self._lock:
            self.messages.append(ReceivedMail(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 OK"

    def connection(self, from_email: str | None = "kafka-zk@example.com") -> dict[str, Any]:
        """An Airflow smtp connection (JSON fields) to this server."""
        extra: dict[str, Any] = {"disable_ssl": True, "disable_tls": True, "retry_limit": 0, "timeout": 10}
        if from_email:
            extra["from_email"] = from_email
        return {"conn_type": "smtp", "host": "127.0.0.1", "port": self.port, "extra": extra}

    def __enter__(self) -> SmtpSink:
        from aiosmtpd.controller import Controller

        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()


@dataclass
class WebhookSink:
    """An HTTP server on 127.0.0.1 answering POSTs as Slack's incoming webhook: ``200 ok``, or
    ``status`` (e.g. 404 ``no_service``) when set; keeps (path, JSON body) of each in ``posts``."""

    status: int = 200
    posts: list[tuple[str, Any]] = field(default_factory=list)
    port: int = field(default_factory=lambda: free_port("127.0.0.1"))

    def connection(self, token: str = "T000/B000/XXXXXXXX") -> dict[str, Any]:  # noqa: S107 (a test token)
        """An Airflow slackwebhook connection to this endpoint (``host`` replaces hooks.slack.com)."""
        return {
            "conn_type": "slackwebhook",
            "host": f"http://127.0.0.1:{self.port}/services",
            "password": token,
        }

    def __enter__(self) -> WebhookSink:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sink.posts.append((self.path, json.loads(body or b"null")))
                reply = b"ok" if sink.status == 200 else b"no_service"
                self.send_response(sink.status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
