"""What a provider's batch API is to the batch judge (:mod:`vtb_agents.judges.batch`): the protocol each
wire format implements (:mod:`vtb_agents.judges.batch_openai`, :mod:`vtb_agents.judges.batch_anthropic`)
and the records it speaks in: a batch's lines, its progress and its results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel

ItemStatus = Literal["succeeded", "errored", "expired", "canceled"]


class BatchError(Exception):
    """A batch that cannot be built, submitted or read (names the batch and the cause)."""


@dataclass(frozen=True)
class BatchItem:
    """One line of a batch: its id (the verdict's cache key), the API path and the request body."""

    custom_id: str
    path: str
    body: dict[str, object]


class ItemResult(BaseModel):
    """What a batch gave for one request: the response body (``succeeded``) or why there is none."""

    status: ItemStatus
    body: dict[str, object] | None = None
    error: str = ""


@dataclass(frozen=True)
class BatchProgress:
    """How far a batch is: the provider's status word, whether it has ended, requests done and failed."""

    batch_id: str
    status: str
    ended: bool
    done: int
    failed: int
    total: int


class BatchApi(Protocol):
    """One provider's batch API (docs/how-to/batch-judging.md)."""

    provider: str

    def relay_base_url(self, root: str) -> str:
        """The judge model's base URL for a relay at ``root`` (so its requests reach the relay)."""
        ...

    def submit(self, items: list[BatchItem]) -> str:
        """Submit ``items`` as one batch; its id."""
        ...

    def progress(self, batch_id: str) -> BatchProgress:
        """The batch's progress now."""
        ...

    def results(self, batch_id: str) -> dict[str, ItemResult]:
        """The results of an ended batch by custom id (a request it never processed may be missing)."""
        ...
