"""OpenAI's Batch API, for the batch judge (:mod:`vtb_agents.judges.batch`).

A batch is a JSONL file of requests (``custom_id``, ``method``, ``url``, ``body``) uploaded to
``/v1/files`` with purpose ``batch``, then ``POST /v1/batches`` for that file with the requests'
endpoint (``/v1/chat/completions``) and completion window ``24h``. ``GET /v1/batches/{id}`` tells its
status; once it has ended (``completed``, ``failed``, ``expired``, ``cancelled``) the output file holds
the responses and the error file the requests that failed or were never processed (``batch_expired``),
both read through ``/v1/files/{id}/content``. The official SDK (``openai``) makes the calls; it reads
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the live judge does.
"""

from __future__ import annotations

import json
from typing import Any, Literal, cast

from vtb_agents.judges.batch_api import BatchError, BatchItem, BatchProgress, ItemResult

ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
COMPLETION_WINDOW: Literal["24h"] = "24h"
Endpoint = Literal["/v1/chat/completions", "/v1/responses"]
ENDPOINTS: tuple[Endpoint, ...] = ("/v1/chat/completions", "/v1/responses")
"""The endpoints an LLM judge's requests go to (langchain-openai uses the Responses API for some models)."""


class OpenAIBatches:
    """OpenAI's Batch API through the ``openai`` SDK."""

    provider = "openai"

    def __init__(self, client: Any = None) -> None:
        import openai

        self.client = client or openai.OpenAI()

    def relay_base_url(self, root: str) -> str:
        """The SDK's base URL for a relay at ``root``: its requests go to ``/v1/...``."""
        return f"{root}/v1"

    def submit(self, items: list[BatchItem]) -> str:
        """Upload ``items`` as a JSONL file and create a batch of it; the batch id."""
        endpoints = {item.path for item in items}
        if len(endpoints) != 1 or not endpoints <= set(ENDPOINTS):
            raise BatchError(f"a batch holds requests to one of {', '.join(ENDPOINTS)}, "
                             f"these go to {sorted(endpoints)}")
        lines = "".join(json.dumps({"custom_id": item.custom_id, "method": "POST", "url": item.path,
                                    "body": item.body}) + "\n" for item in items)
        upload = self.client.files.create(file=("vtb-judge-batch.jsonl", lines.encode()), purpose="batch")
        batch = self.client.batches.create(input_file_id=upload.id, endpoint=cast(Endpoint, endpoints.pop()),
                                           completion_window=COMPLETION_WINDOW, metadata={"created_by": "vtb-agents"})
        return str(batch.id)

    def progress(self, batch_id: str) -> BatchProgress:
        """The batch's status and request counts."""
        batch = self.client.batches.retrieve(batch_id)
        counts = batch.request_counts
        return BatchProgress(batch_id, batch.status, batch.status in ENDED, counts.completed if counts else 0,
                             counts.failed if counts else 0, counts.total if counts else 0)

    def results(self, batch_id: str) -> dict[str, ItemResult]:
        """The responses of an ended batch from its output file, and the failures from its error file."""
        batch = self.client.batches.retrieve(batch_id)
        found: dict[str, ItemResult] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for number, line in enumerate(self.client.files.content(file_id).text.splitlines(), start=1):
                if line.strip():
                    custom_id, result = _item(line, f"batch {batch_id} file {file_id} line {number}")
                    found[custom_id] = result
        return found


def _item(line: str, where: str) -> tuple[str, ItemResult]:
    """One line of an output or error file: its custom id and result."""
    try:
        data = json.loads(line)
        custom_id = str(data["custom_id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BatchError(f"{where}: not a batch result line ({type(exc).__name__}: {exc})") from exc
    response, error = data.get("response") or {}, data.get("error") or {}
    if response.get("status_code") == 200 and isinstance(response.get("body"), dict):
        return custom_id, ItemResult(status="succeeded", body=response["body"])
    code = str(error.get("code") or response.get("status_code") or "unknown")
    message = error.get("message") or json.dumps(response.get("body"))[:300]
    return custom_id, ItemResult(status="expired" if code == "batch_expired" else "errored",
                                 error=f"{code}: {message}")
