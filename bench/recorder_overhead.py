"""What recording a task's transcript costs per tool round, and what memoising its images saves.

Side by side in one run (interleaved repetitions, medians): the agent graph's rounds (zero-latency
scripted model, calculator tool, in-memory checkpointer, the turn's message carrying a 1024x768
photo-like image that every model call re-sends) (a) without callbacks and (b) with the
transcript recorder (:mod:`vtb_agents.episodes.recorder`) as the episode driver installs it.
Then the recorder's own work on one request of a conversation with six such images: hashing the
request's images afresh (``wire_request`` without memo) against the memoised hashing it does.

    .venv/bin/python bench/recorder_overhead.py
"""

from __future__ import annotations

import io
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from PIL import Image

from vtb_agents.artifacts import ArtifactStore, image_ref_block
from vtb_agents.episodes.driver import CHECKPOINT_DURABILITY
from vtb_agents.episodes.recorder import TranscriptRecorder
from vtb_agents.graphs.categories import build_category_graph
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.models.wire import wire_request
from vtb_agents.sandbox import open_sandbox
from vtb_agents.strategies.base import EpisodeContext
from vtb_agents.strategies.loop import recursion_limit
from vtb_agents.strategies.observe import materialize_messages
from vtb_agents.tools import bind_episode_tools, select_tools

ROUNDS, REPEATS = 20, 7


def photo(seed: int) -> bytes:
    """A 1024x768 PNG with smooth gradients and some noise (compresses like a photo, not like noise)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:768, 0:1024]
    base = np.stack([(x / 4 + seed * 40) % 256, (y / 3) % 256, ((x + y) / 7) % 256], axis=-1)
    pixels = np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def replies() -> list[AIMessage]:
    calls = [AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": f"{n}^2"}, "id": f"c{n}"}])
             for n in range(ROUNDS)]
    return calls + [AIMessage("done")]


def through_graph(sandbox, artifacts: ArtifactStore, ref: str, recorder: TranscriptRecorder | None) -> float:
    graph = build_category_graph("region_switch", checkpointer=InMemorySaver())
    context = EpisodeContext(model=ScriptedChatModel(replies=replies()), sandbox=sandbox, artifacts=artifacts,
                             tools=bind_episode_tools(select_tools(), sandbox, artifacts), system_prompt="bench",
                             max_tool_rounds=ROUNDS)
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": recursion_limit(ROUNDS),
              "callbacks": [recorder] if recorder is not None else []}
    opening = HumanMessage([{"type": "text", "text": "go"}, image_ref_block(ref, "image_0.png")], id="turn-0")
    start = time.perf_counter()
    state = graph.invoke({"messages": [opening], "turn": 0, "num_turns": 1}, config, context=context,
                         durability=CHECKPOINT_DURABILITY)
    elapsed = time.perf_counter() - start
    assert state["tool_rounds"] == ROUNDS
    if recorder is not None:
        assert len(recorder.transcript("t").of_kind("model")) == ROUNDS + 1
    return elapsed / ROUNDS


def hashing(artifacts: ArtifactStore, refs: list[str]) -> tuple[float, float]:
    """(afresh, memoised) seconds to hash one request with the images of ``refs``."""
    messages = materialize_messages([HumanMessage([image_ref_block(r, f"image_{i}.png")]) for i, r in enumerate(refs)],
                                    artifacts, 1024)
    known: dict = {}
    wire_request(messages, known)  # the conversation's first request saw them
    start = time.perf_counter()
    wire_request(messages)
    afresh = time.perf_counter() - start
    start = time.perf_counter()
    wire_request(messages, known)
    return afresh, time.perf_counter() - start


def main() -> None:
    samples: dict[str, list[float]] = {"graph, no recorder": [], "graph, recorder": [], "hash afresh": [],
                                       "hash memoised": []}
    with tempfile.TemporaryDirectory() as tmp, open_sandbox("local") as sandbox:
        artifacts = ArtifactStore(Path(tmp) / "artifacts")
        refs = [artifacts.put(photo(seed)) for seed in range(6)]
        size = sum(len(artifacts.get(r)) for r in refs) / 1e6
        through_graph(sandbox, artifacts, refs[0], TranscriptRecorder(artifacts))  # warm-up
        for _ in range(REPEATS):
            samples["graph, no recorder"].append(through_graph(sandbox, artifacts, refs[0], None))
            samples["graph, recorder"].append(through_graph(sandbox, artifacts, refs[0], TranscriptRecorder(artifacts)))
            afresh, memoised = hashing(artifacts, refs)
            samples["hash afresh"].append(afresh)
            samples["hash memoised"].append(memoised)
    print(f"{ROUNDS} calculator rounds per episode (one image re-sent per call), median of {REPEATS} interleaved "
          f"repetitions; hashing: one request with 6 images ({size:.1f} MB)")
    plain, recorded = (statistics.median(samples[k]) for k in ("graph, no recorder", "graph, recorder"))
    print(f"per round: no recorder {plain * 1000:.2f} ms, recorder {recorded * 1000:.2f} ms "
          f"({recorded / plain:.2f}x, +{(recorded - plain) * 1000:.2f} ms)")
    afresh, memoised = (statistics.median(samples[k]) for k in ("hash afresh", "hash memoised"))
    print(f"hashing a request's images: afresh {afresh * 1000:.2f} ms, memoised {memoised * 1000:.3f} ms "
          f"({afresh / memoised:.0f}x)")


if __name__ == "__main__":
    main()
