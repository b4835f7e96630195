"""The base refusals of the safety layer, shared by the session (:mod:`.session`) and the approval
rule it applies (:mod:`.approval`) without either importing the other's module for them."""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowFailException


class MaintenanceRefusedError(AirflowFailException):
    """A mutation refused before changing anything (or stopped between two changes); not retried."""


class ClusterIdentityError(MaintenanceRefusedError):
    """The cluster (or a broker host) is not the one the run is meant for, or that cannot be proven."""


__all__ = ["ClusterIdentityError", "MaintenanceRefusedError"]
