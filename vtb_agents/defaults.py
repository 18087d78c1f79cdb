"""Every default setting of a run, as plain constants (standard library only).

Their one definition: ``RunConfig`` and ``EpisodeSettings`` (:mod:`vtb_agents.config`), the
strategies, models, tasks and sandbox modules name them from here, and so do the ``vtb`` options,
which is what lets ``vtb --help`` show them without importing the runner, LangChain or LangGraph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

REPLAY: Final = "replay"
"""The model spec of the scripted agent that replays each task's golden tool calls."""
SAMPLE: Final = "sample"
"""The task source of the bundled sample suite."""
AGENT_PREFIX: Final = "agent:"
"""The model spec prefix of your own LangChain agent: ``agent:module:function``."""
OBJECT_PREFIX: Final = "object:"
"""How ``run.json`` names a Python object given to :func:`vtb_agents.evaluate` (a model, judge,
strategy, agent or tool): ``object:ChatOpenAI(model=gpt-4o)``. A name, not a spec: such a run
resumes only from Python, given the same objects."""
DEFAULT_STRATEGY: Final = "react"
DEFAULT_JUDGE: Final = "rule"
DEFAULT_CRITICAL_RULE: Final = "weight"
DEFAULT_RESUMER: Final = "scripted"
DEFAULT_SANDBOX: Final = "local"
DEFAULT_REQUEST_TIMEOUT_S: Final = 120.0
DEFAULT_MAX_TOOL_ROUNDS: Final = 20
DEFAULT_EPOCHS: Final = 1
"""How many times each task runs, as independent episodes (``vtb run --epochs``)."""
DEFAULT_MAX_IMAGE_SIDE: Final = 2048
DEFAULT_PROMPT_LEVEL: Final = "high"
DEFAULT_HISTORY: Final = "golden"
DEFAULT_NATIVE_TOOL_IMAGES: Final = False
DEFAULT_CODE_TIMEOUT_S: Final = 60.0
"""How long one code call may run by default (the code tools' and the sandboxes' one default)."""
DEFAULT_MAX_PIXELS: Final = 50_000_000
"""Images with more pixels are refused as likely decompression bombs (VTB images are far smaller): by the task
validator, by the code tools when the model's code saves one, and by the artifact store before decoding."""


@dataclass(frozen=True)
class AgentSpec:
    """A decoded ``agent:package.module:function`` spec: your own LangChain agent's factory.

    The one decoder of ``agent:`` specs: the CLI, the config, the model records and the strategy
    registry all ask :meth:`parse` whether a spec names an agent.
    """

    module: str
    function: str

    @property
    def target(self) -> str:
        """``package.module:function``, what is imported."""
        return f"{self.module}:{self.function}"

    @property
    def spec(self) -> str:
        """The spec that names this agent, as ``run.json`` records it."""
        return f"{AGENT_PREFIX}{self.target}"

    @classmethod
    def parse(cls, spec: str) -> AgentSpec | None:
        """The agent ``spec`` names, ``None`` if it names none (no ``agent:`` prefix); a malformed
        ``agent:`` spec raises ValueError naming it and the expected shape.

        >>> AgentSpec.parse("agent:my_pkg.agents:build")
        AgentSpec(module='my_pkg.agents', function='build')
        >>> AgentSpec.parse("openai:gpt-4o") is None
        True
        """
        if not spec.startswith(AGENT_PREFIX):
            return None
        module, _, function = spec[len(AGENT_PREFIX):].partition(":")
        if not module or not function or ":" in function:
            raise ValueError(f"agent spec {spec!r} must look like 'agent:package.module:function'")
        return cls(module, function)


def strategy_name(model: str, strategy: str) -> str:
    """The strategy that answers a run's turns: the user's agent for ``agent:`` models, else ``strategy``
    (the one definition: ``RunConfig.strategy_spec`` and the readers of a recorded run name it so)."""
    return model if AgentSpec.parse(model) is not None else strategy
