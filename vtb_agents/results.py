"""The records a run produces: an episode per task, its grade, and the line in ``results.jsonl``.

These are the contracts between the graphs, the judges, the analysis and the runner.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vtb_agents.config import EpisodeSettings

TurnStatus = Literal["answered", "asked_user", "tool_round_cap", "error"]
VerdictStatus = Literal["met", "not_met", "unjudged", "error"]

Outcome = Literal["answered", "tool_round_cap", "task_timeout", "step_limit", "token_limit", "context_exceeded",
                  "provider_error", "sandbox_error", "storage_error", "harness_error", "judge_error",
                  "unjudged"]
"""How a task ended (docs/concepts/outcomes.md). Model-side outcomes are graded like any answer;
infrastructure outcomes leave the task ungraded until ``vtb run --resume --retry-errors``."""
MODEL_OUTCOMES: frozenset[str] = frozenset({"answered", "tool_round_cap", "task_timeout", "step_limit",
                                           "token_limit", "context_exceeded"})
"""The model's own doing: a turn left unanswered fails its rubrics."""
INFRASTRUCTURE_OUTCOMES: frozenset[str] = frozenset(
    {"provider_error", "sandbox_error", "storage_error", "harness_error", "judge_error"})
"""Not the model's doing: the task is ungraded, the run incomplete, and a retry re-runs it."""


def is_infrastructure(outcome: str | None) -> bool:
    """True for an outcome that leaves a task ungraded and is retried by ``--retry-errors``."""
    return outcome in INFRASTRUCTURE_OUTCOMES


class ImageRegion(BaseModel):
    """The part of a task image another image shows: ``box`` (left, top, right, bottom; right and
    bottom exclusive, as Pillow's ``crop``) in the pixels of ``image`` (``image_N.png``), which is
    ``image_size`` (width, height) large. Recorded by the sandbox's region tracking
    (``sandbox/region_tracker.py``), or, for an image made without Pillow (NumPy slicing, OpenCV),
    found from its pixels (``located``: ``sandbox/locate.py``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)
    image: str = Field(pattern=r"^image_\d+\.png$")
    box: tuple[float, float, float, float]
    image_size: tuple[int, int]
    located: bool = False

    @model_validator(mode="after")
    def _inside(self) -> ImageRegion:
        x0, y0, x1, y1 = self.box
        width, height = self.image_size
        if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
            raise ValueError(f"box {self.box} is not a non-empty box inside {width}x{height}")
        return self

    @property
    def is_crop(self) -> bool:
        """Whether the box is a proper part of the image (a resized whole image is no crop)."""
        return self.box != (0, 0, *self.image_size)


class SavedImage(BaseModel):
    """An image a tool call or a strategy step saved: its file name, its artifact reference (the sha256
    of its bytes in ``artifacts/``), its size ``[width, height]``, and the region of a task image it
    was cut from (None when the sandbox did not track one)."""

    model_config = ConfigDict(extra="allow")
    name: str
    ref: str
    size: list[int] | None = None
    region: ImageRegion | None = None


class ToolCallRecord(BaseModel):
    """One tool call, as the model made it and as the tool answered: the one record of a tool call,
    in a turn's record (``results.jsonl``) and in the transcript's tool event, which carries this very
    record (docs/reference/transcripts.md).

    ``turn`` and ``round`` (0-based) place it; both are None only in a transcript, for a call no turn
    record lists (one a time limit cut off). ``ok`` is False for a call that failed (an error result,
    code that raised, a tool the model named that does not exist); ``error`` is the error seen, when
    one was; ``duration_s`` how long it ran."""

    turn: int | None = None
    round: int | None = None
    id: str
    name: str
    args: Any = None
    ok: bool
    output: str = ""
    images: list[SavedImage] = Field(default_factory=list)
    duration_s: float | None = None
    error: str | None = None

    @property
    def place(self) -> str:
        """Where the call was made, 1-based: ``turn 2 round 1`` (``?`` for what is not known)."""
        return " ".join(f"{what} {'?' if at is None else at + 1}" for what, at in (("turn", self.turn),
                                                                                 ("round", self.round)))


class TurnRecord(BaseModel):
    """What happened in one turn: the final answer and how the turn ended.

    ``regions`` are the crops of task images shown to the model in the turn (its tool calls' images
    and a strategy's views); ``reference_regions`` the crops the reference trajectory's code makes
    (None: not measured); ``best_crop_iou`` the best IoU of any region with any reference region of
    the same image, 0.0 when the model cropped nothing, None when the reference crops nothing or
    when nothing the model showed matched and some of its images could not be located
    (``not_located``: the images its code saved with no tracked region and none found from their
    pixels; docs/concepts/region-iou.md).
    """

    index: int
    answer: str
    status: TurnStatus
    tool_rounds: int = 0
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    regions: list[ImageRegion] = Field(default_factory=list)
    reference_regions: list[ImageRegion] | None = None
    best_crop_iou: float | None = None
    not_located: list[str] = Field(default_factory=list)

    @property
    def unlocated(self) -> bool:
        """Whether the turn is unmeasured because the model's images could not be located ("not located")."""
        return bool(self.reference_regions) and self.best_crop_iou is None and bool(self.not_located)


class EpisodeRecordSettings(EpisodeSettings):
    """How one episode ran, recorded with it: the run's episode settings (every field of
    :class:`~vtb_agents.config.EpisodeSettings`, inherited, never re-declared), the strategy that
    answered its turns (the run's :attr:`~vtb_agents.config.RunConfig.strategy_spec`), its tools,
    resumer (by name) and graph, and how the sandbox confined code (None where the backend does not say):
    what the episode had, resolved, where :class:`~vtb_agents.config.RunConfig` holds the options."""

    strategy: str
    tools: list[str] = Field(default_factory=list)
    resumer: str
    graph: str
    sandbox_isolation: str | None = None
    sandbox_memory_cap: str | None = None
    sandbox_syscall_filter: str | None = None
    sandbox_network: str | None = None


class Episode(BaseModel):
    """A model's run through all turns of one task."""

    task_id: str
    model: str
    turns: list[TurnRecord] = Field(default_factory=list)
    status: Literal["completed", "error"] = "completed"
    error: str | None = None
    traceback: str | None = None
    """The (short) traceback of the error that ended the episode, for the report."""
    settings: EpisodeRecordSettings | None = None
    """How the episode ran; None for an episode that failed before it started (its task's error says why)."""
    outcome: Outcome | None = None
    """How the episode ended; None in results written before outcomes existed (see ``ended``)."""
    strategy_image_ops: dict[str, int] = Field(default_factory=dict)
    """Images the strategy's own steps made, by operation (``crop``: zoom views, ``mark``: marked
    images), apart from the model's tool calls (summary ``tool_metrics.strategy_image_ops``)."""

    @property
    def ended(self) -> Outcome:
        """The episode's outcome: the recorded one, else derived (an old errored episode counts as
        ``harness_error``, so that ``--retry-errors`` re-runs it)."""
        if self.outcome is not None:
            return self.outcome
        if self.status == "error":
            return "task_timeout" if (self.error or "").startswith("TaskTimeout:") else "harness_error"
        return "tool_round_cap" if any(t.status == "tool_round_cap" for t in self.turns) else "answered"

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        """Every tool call of every turn, in order."""
        return [call for turn in self.turns for call in turn.tool_calls]


class RubricVerdict(BaseModel):
    """The judgement of one rubric of one turn. ``critical`` follows the run's critical rule;
    ``critical_flag`` is the dataset's own flag (they can disagree)."""

    rubric_id: str
    turn: int
    weight: int
    critical: bool
    critical_flag: bool = False
    status: VerdictStatus
    justification: str = ""
    judge: str = ""
    cached: bool = False
    model_call: bool = False
    """The judge asked a model for this verdict (not a check, a deterministic judge or the cache)."""


PENDING = "pending: judged in a batch once the run's episodes are done (vtb run --judge-batch)"
"""The justification of a verdict a ``vtb run --judge-batch`` left for its batch grading
(:mod:`vtb_agents.judges.batch`): an ``error`` verdict meanwhile, so its task is not graded yet."""


def is_pending(verdict: RubricVerdict) -> bool:
    """Whether ``verdict`` waits for the batch grading of a ``vtb run --judge-batch``."""
    return verdict.status == "error" and verdict.justification == PENDING


class TurnGrade(BaseModel):
    """One turn's share of a task grade (the task itself is pooled over all turns, as in VTB)."""

    turn: int
    score: float | None = None
    passed: bool | None = None


class TaskGrade(BaseModel):
    """A task's grade. ``score`` is met weight over judged weight; ``passed`` needs every critical
    rubric met. A task with a judge error, or with a critical rubric nobody could judge, is
    ``ungraded``: its score and pass are None, and it is left out of APR and ARS.
    """

    verdicts: list[RubricVerdict] = Field(default_factory=list)
    score: float | None = None
    passed: bool | None = None
    graded: bool = False
    reason: str | None = None
    critical_rule: str = "weight"
    by_turn: list[TurnGrade] = Field(default_factory=list)


class TokenUsage(BaseModel):
    """Token counts summed over chat-model calls, as the provider reported them (LangChain's
    ``usage_metadata``). ``input_tokens`` includes ``cached_tokens`` (cache reads) and
    ``cache_write_tokens``; ``output_tokens`` includes ``reasoning_tokens``. ``calls_without_usage``
    counts calls whose reply carried no usage: their tokens are unknown, not zero. The ``batch_*``
    counts are the part of the others billed at the batch rate (a batch API, or OpenAI's
    ``service_tier="flex"``; docs/how-to/cost-and-rate-limits.md), included in them, so that sums stay sums."""

    calls: int = 0
    calls_without_usage: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    batch_calls: int = 0
    batch_input_tokens: int = 0
    batch_cached_tokens: int = 0
    batch_cache_write_tokens: int = 0
    batch_output_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(**{k: getattr(self, k) + getattr(other, k) for k in TokenUsage.model_fields})

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(**{k: getattr(self, k) - getattr(other, k) for k in TokenUsage.model_fields})


class TaskUsage(BaseModel):
    """A task's token usage: the agent model's (in total and per turn, 0-based) and the judge's.
    ``model_from_cache`` and ``judge_from_cache`` are the part of each that the model cache answered
    (``vtb run --model-cache``): counted in ``model`` and ``judge`` as originally reported, billed nothing.
    The part of each billed at the batch price (a provider's batch API, ``vtb grade --batch``, or a
    batch-priced service tier) is in its ``batch_*`` counts (docs/how-to/batch-judging.md)."""

    model: TokenUsage = Field(default_factory=TokenUsage)
    model_by_turn: dict[int, TokenUsage] = Field(default_factory=dict)
    judge: TokenUsage = Field(default_factory=TokenUsage)
    model_from_cache: TokenUsage = Field(default_factory=TokenUsage)
    judge_from_cache: TokenUsage = Field(default_factory=TokenUsage)


RESULTS_FORMAT = 1
"""The format version of ``results.jsonl`` that this vtb writes and reads: the ``format_version`` that
begins each of its lines (:class:`TaskResult`; checked by :mod:`vtb_agents.rundir.store`)."""


class TaskResult(BaseModel):
    """One line of ``results.jsonl``: one episode of a task (``epoch`` 1..K of ``vtb run --epochs K``).
    ``format_version`` comes first, so that a reader sees a line's format before anything else."""

    format_version: int = RESULTS_FORMAT
    """The format of this line (:data:`RESULTS_FORMAT` when this vtb wrote it)."""
    task_id: str
    epoch: int = Field(default=1, ge=1)
    """Which of the task's independent runs this is (1..K, ``vtb run --epochs K``)."""
    category: str
    category_raw: str
    domain: str
    domain_raw: str
    turncase: str
    model: str
    strategy: str = "react"
    episode: Episode
    grade: TaskGrade
    duration_s: float
    usage: TaskUsage | None = None
    outcome: Outcome | None = None
    """How the task ended, grading included (docs/concepts/outcomes.md); see :func:`task_outcome`."""

    @property
    def ended(self) -> Outcome:
        """The recorded outcome, or for results written before outcomes existed, the derived one."""
        return self.outcome or task_outcome(self.episode, self.grade)

    @property
    def infrastructure_failed(self) -> bool:
        """True when the task is ungraded for reasons that are not the model's doing."""
        return is_infrastructure(self.ended)


def task_outcome(episode: Episode, grade: TaskGrade) -> Outcome:
    """The outcome of a graded episode: an infrastructure failure of the episode first, then of the
    judge, then rubrics nobody could judge (rule judge without a check), else the episode's own."""
    ended = episode.ended
    if is_infrastructure(ended):
        return ended
    if any(v.status == "error" and v.judge != "episode" for v in grade.verdicts):
        return "judge_error"
    if not grade.graded:
        return "unjudged"
    return ended
