"""What every audit rule returns: a finding with a stable check id, a severity, a subject, the evidence
and what to do. Plain data, so Spark executors, Parquet files, reports and Airflow gates share it."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any


class Severity(enum.IntEnum):
    INFO = 10
    WARNING = 20
    ERROR = 30
    CRITICAL = 40

    @classmethod
    def parse(cls, text: str | Severity) -> Severity:
        if isinstance(text, Severity):
            return text
        try:
            return cls[str(text).strip().upper()]
        except KeyError:
            raise ValueError(
                f"severity must be one of {[s.name.lower() for s in cls]}, not {text!r}"
            ) from None


@dataclass(frozen=True)
class Finding:
    """One thing an on-call engineer should know. ``check`` ids are stable (dashboards, silences)."""

    check: str
    severity: Severity
    cluster: str
    summary: str
    action: str = ""
    topic: str | None = None
    partition: int | None = None
    broker_id: int | None = None
    path: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        """A flat dict for Parquet/JSON: severity by name, evidence as a JSON-able dict."""
        row = asdict(self)
        row["severity"] = self.severity.name.lower()
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Finding:
        return cls(
            **{
                **row,
                "severity": Severity.parse(row["severity"]),
                "evidence": dict(row.get("evidence") or {}),
            }
        )


def count_by_check_and_severity(findings: Iterable[Finding]) -> dict[str, dict[str, int]]:
    counts: dict[str, Counter[str]] = {}
    for f in findings:
        counts.setdefault(f.check, Counter())[f.severity.name.lower()] += 1
    return {check: dict(c) for check, c in sorted(counts.items())}


def most_severe_first(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(
        findings,
        key=lambda f: (
            -f.severity,
            f.check,
            f.topic or "",
            f.partition if f.partition is not None else -1,
            f.broker_id or -1,
        ),
    )
