"""Exceptions raised by collective calls.

Every error names the operation, this rank and, where one is known, the peer rank, so that a
log line from any worker says who was waiting on whom.
"""

from __future__ import annotations


class CollectiveError(RuntimeError):
    """A collective call failed: a peer died or broke the connection, the engine raised, or
    the communicator was already unusable after an earlier failure.

    Attributes: ``op`` (e.g. ``"allreduce(ring)"``), ``rank`` (this rank), ``peer`` (the rank
    being waited on, or None when the engine does not say).
    """

    def __init__(
        self, message: str, *, op: str | None = None, rank: int | None = None,
        peer: int | None = None,
    ) -> None:
        super().__init__(message)
        self.op = op
        self.rank = rank
        self.peer = peer


class CollectiveTimeout(CollectiveError, TimeoutError):
    """No progress within the call's timeout: a peer is dead, never entered the call, or is
    itself blocked on another rank."""


class MetadataMismatchError(CollectiveError, ValueError):
    """Ranks called the same collective with disagreeing arguments (shape, dtype, operation,
    reducer, algorithm, root or device). Raised on every rank, after a complete exchange, so
    the communicator stays usable."""
