"""Typed errors of the pure core.

Every decoder raises one of these instead of a bare KeyError/IndexError/struct.error, and
each names *where* the bad bytes came from (a znode path, a file path, a byte position) and
*what was expected*, so a finding or a log line tells an SRE exactly what to look at.
"""

from __future__ import annotations


class KafkaFormatError(ValueError):
    """Input does not match the Kafka format it is supposed to be in."""

    def __init__(self, source: str, expected: str, found: str | None = None) -> None:
        self.source = source
        self.expected = expected
        self.found = found
        message = f"{source}: expected {expected}"
        if found is not None:
            message += f", found {found}"
        super().__init__(message)


class ZnodeFormatError(KafkaFormatError):
    """A znode's data is not what Kafka writes (or reads) at that path."""


class LogDirFormatError(KafkaFormatError):
    """A file or directory name in a broker log dir is not in Kafka's format."""


class RecordFormatError(KafkaFormatError):
    """A log segment or index holds bytes that are not a valid batch or entry.

    ``position`` is the byte offset in the file where the problem starts (None when unknown).
    """

    def __init__(
        self, source: str, expected: str, found: str | None = None, *, position: int | None = None
    ) -> None:
        self.position = position
        where = source if position is None else f"{source} @ byte {position}"
        super().__init__(where, expected, found)
        self.source = source


def describe(value: object, limit: int = 60) -> str:
    """Short repr of a bad value for an error message (never the whole blob)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
