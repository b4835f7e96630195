"""Kafka's Uuid text form: 16 big-endian bytes as URL-safe base64 without padding (22 chars).

Not the canonical 8-4-4-4-12 UUID string. Used for topic ids (``topic_id`` in the topic znode,
``partition.metadata``) and, generated without the reserved-value checks, for the cluster id.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
from dataclasses import dataclass

from .errors import KafkaFormatError, describe

_URLSAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

_PARSED: dict[str, bytes] = {}
"""Text -> bytes of the Uuids parsed so far: an audit parses the same few thousand topic ids once
per replica directory (a million of them at scale); bounded by :data:`_PARSED_MAX`."""
_PARSED_MAX = 1 << 16


@dataclass(frozen=True, order=True)
class KafkaUuid:
    """A Kafka Uuid; ``str()`` gives the 22-character form Kafka writes."""

    raw: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.raw, bytes) or len(self.raw) != 16:
            raise KafkaFormatError("Uuid", "16 bytes", describe(self.raw))

    @classmethod
    def parse(cls, text: object, source: str = "Uuid") -> KafkaUuid:
        """Decode as ``Uuid.fromString`` does: 22 chars, or the padded 24-char form."""
        if type(text) is str and (known := _PARSED.get(text)) is not None:
            return cls(known)
        if not isinstance(text, str):
            raise KafkaFormatError(source, "a base64url Uuid string", describe(text))
        if len(text) > 24:
            raise KafkaFormatError(source, "a Uuid of at most 24 characters", describe(text))
        body = text.rstrip("=")
        if not body or not set(body) <= _URLSAFE:
            raise KafkaFormatError(source, "URL-safe base64 (A-Z a-z 0-9 - _)", describe(text))
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError) as exc:
            raise KafkaFormatError(source, "URL-safe base64", f"{describe(text)} ({exc})") from None
        if len(raw) != 16:
            raise KafkaFormatError(source, "16 decoded bytes", f"{len(raw)} from {describe(text)}")
        if type(text) is str and len(_PARSED) < _PARSED_MAX:
            _PARSED[text] = raw
        return cls(raw)

    @classmethod
    def from_longs(cls, most_significant: int, least_significant: int) -> KafkaUuid:
        mask = (1 << 64) - 1
        return cls(
            (most_significant & mask).to_bytes(8, "big") + (least_significant & mask).to_bytes(8, "big")
        )

    @classmethod
    def random(cls, *, allow_leading_dash: bool = False) -> KafkaUuid:
        """Like ``Uuid.randomUuid``: never a reserved id; no leading '-' (3.2+ rule) by default."""
        while True:
            candidate = cls(os.urandom(16))
            if candidate.is_reserved:
                continue
            if not allow_leading_dash and str(candidate).startswith("-"):
                continue
            return candidate

    @property
    def is_zero(self) -> bool:
        return self.raw == ZERO_UUID.raw

    @property
    def is_reserved(self) -> bool:
        return self.raw in (ZERO_UUID.raw, ONE_UUID.raw)

    def __str__(self) -> str:
        return _text(self.raw)

    def __repr__(self) -> str:
        return f"KafkaUuid({str(self)!r})"


@functools.lru_cache(maxsize=1 << 16)
def _text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


ZERO_UUID = KafkaUuid(bytes(16))
"""``AAAAAAAAAAAAAAAAAAAAAA``: "no id"; rejected inside partition.metadata."""
ONE_UUID = KafkaUuid(bytes(15) + b"\x01")
"""``AAAAAAAAAAAAAAAAAAAAAQ``: METADATA_TOPIC_ID (KRaft's metadata topic)."""
