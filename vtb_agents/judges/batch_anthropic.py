"""Anthropic's Message Batches API, for the batch judge (:mod:`vtb_agents.judges.batch`).

``POST /v1/messages/batches`` takes the requests (``custom_id`` and ``params``, the body of a
``/v1/messages`` request); ``GET /v1/messages/batches/{id}`` tells its ``processing_status`` and
request counts; once ``ended``, the JSONL at its ``results_url`` holds one result per request
(``succeeded`` with the message, ``errored``, ``canceled`` or ``expired``). The official SDK
(``anthropic``) makes the calls; it reads ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` as the live
judge does.
"""

from __future__ import annotations

from typing import Any, cast

from vtb_agents.judges.batch_api import BatchError, BatchItem, BatchProgress, ItemResult

MESSAGES_PATH = "/v1/messages"


class AnthropicBatches:
    """Anthropic's Message Batches API through the ``anthropic`` SDK."""

    provider = "anthropic"

    def __init__(self, client: Any = None) -> None:
        import anthropic

        self.client = client or anthropic.Anthropic()

    def relay_base_url(self, root: str) -> str:
        """The SDK's base URL for a relay at ``root`` (it adds ``/v1/messages`` itself)."""
        return root

    def submit(self, items: list[BatchItem]) -> str:
        """Create a message batch of ``items``; its id."""
        wrong = sorted({item.path for item in items} - {MESSAGES_PATH})
        if wrong:
            raise BatchError(f"a message batch holds {MESSAGES_PATH} requests, not {wrong}")
        batch = self.client.messages.batches.create(
            requests=[{"custom_id": item.custom_id, "params": cast(Any, item.body)} for item in items])
        return str(batch.id)

    def progress(self, batch_id: str) -> BatchProgress:
        """The batch's processing status and request counts."""
        batch = self.client.messages.batches.retrieve(batch_id)
        counts = batch.request_counts
        failed = counts.errored + counts.canceled + counts.expired
        total = counts.processing + counts.succeeded + failed
        return BatchProgress(batch_id, batch.processing_status, batch.processing_status == "ended",
                             counts.succeeded + failed, failed, total)

    def results(self, batch_id: str) -> dict[str, ItemResult]:
        """Each request's result from the batch's results file."""
        found: dict[str, ItemResult] = {}
        from anthropic.types.messages import MessageBatchSucceededResult

        for entry in self.client.messages.batches.results(batch_id):
            result = entry.result
            if isinstance(result, MessageBatchSucceededResult):
                found[entry.custom_id] = ItemResult(status="succeeded", body=result.message.model_dump(mode="json"))
            elif result.type in ("errored", "canceled", "expired"):
                error = getattr(result, "error", None)
                found[entry.custom_id] = ItemResult(status=result.type,
                                                    error=str(getattr(error, "error", error) or result.type))
            else:
                raise BatchError(f"message batch {batch_id}: result of {entry.custom_id} has unknown type "
                                 f"{result.type!r}")
        return found
