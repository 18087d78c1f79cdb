"""The bounded transport tells streamed from plain requests without parsing image-laden bodies,
and still checks every plain completion (models/http.py), over a real local server."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from support.openai_server import OpenAIServer
from vtb_agents.models.http import MalformedResponse
from vtb_agents.models.spec import chat_model

TRICKY = 'Reply to this JSON: {"stream": true, "stream":true}'  # escaped inside the request body


@pytest.fixture
def server(monkeypatch):
    def respond(body):
        return "streamed fine" if body.get("stream") else ("raw", "this is not a completion")

    with OpenAIServer(respond) as running:
        monkeypatch.setenv("OPENAI_BASE_URL", running.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield running


def test_plain_request_mentioning_stream_is_still_checked(server):
    with pytest.raises(MalformedResponse, match="not a completion"):
        chat_model("openai:m").invoke([HumanMessage(TRICKY)])
    assert server.requests[-1]["stream"] is False


def test_streamed_request_passes_unchecked(server):
    model = chat_model("openai:m", extra={"streaming": True})
    assert model.invoke([HumanMessage(TRICKY)]).content == "streamed fine"
    assert server.requests[-1]["stream"] is True
