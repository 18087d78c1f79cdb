"""The task model: a task is a list of turns, each with a prompt, images, golden answer,
reference trajectory and VTB rubrics. Category and domain are normalised; raw values kept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

from vtb_agents.safefs import read_in_dir
from vtb_agents.tasks import jsontext
from vtb_agents.tasks.normalize import normalize_category, normalize_domain

CRITICAL_WEIGHT = 4
"""Rubrics with at least this weight are critical under the paper's weight rule."""


def _yes_no(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"yes", "y", "true", "1"}:
        return True
    if text in {"no", "n", "false", "0", ""}:
        return False
    raise ValueError(f"expected 'yes' or 'no', got {value!r}")


class Check(BaseModel):
    """A deterministic test of an answer that decides a rubric without an LLM judge.

    ``contains_any`` / ``contains_all`` / ``not_contains`` match ``values`` as substrings
    (case-insensitive unless ``case_sensitive``), ``number`` is met when some number in the
    answer is within ``tolerance`` of ``value``, ``regex`` searches ``pattern``.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    type: Literal["contains_any", "contains_all", "not_contains", "number", "regex"]
    values: list[str] = Field(default_factory=list)
    case_sensitive: bool = False
    value: float | None = None
    tolerance: float = 0.0
    pattern: str | None = None

    @model_validator(mode="after")
    def _fields_for_type(self) -> Check:
        if self.type in {"contains_any", "contains_all", "not_contains"} and not self.values:
            raise ValueError(f"check type {self.type!r} needs a non-empty 'values' list")
        if self.type == "number" and self.value is None:
            raise ValueError("check type 'number' needs 'value'")
        if self.type == "regex" and not self.pattern:
            raise ValueError("check type 'regex' needs 'pattern'")
        if self.tolerance < 0:
            raise ValueError("check 'tolerance' must be >= 0")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"check 'pattern' is not a valid regular expression: {exc}") from None
        return self


class Rubric(BaseModel):
    """One VTB rubric criterion; field aliases are the dataset's JSON keys.

    Unknown keys are kept (``model_extra``) so that an import/export round trip loses nothing.
    ``weight`` is not range-checked here: validation reports weights outside 1..5.
    """

    model_config = ConfigDict(populate_by_name=True, extra="allow")

    id: str
    description: str
    weight: int
    objectivity: str = Field("", alias="objective/subjective")
    explicitness: str = Field("", alias="explicit/implicit")
    categories: list[str] = Field(default_factory=list, alias="category")
    critical: bool = False
    final_answer: bool = False
    check: Check | None = None

    @field_validator("critical", "final_answer", mode="before")
    @classmethod
    def _parse_yes_no(cls, value: Any) -> bool:
        return _yes_no(value)

    @field_validator("categories", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_serializer("critical", "final_answer")
    def _dump_yes_no(self, value: bool) -> str:
        return "yes" if value else "no"

    def is_critical(self, rule: Literal["weight", "flag", "either"] = "weight") -> bool:
        """Whether this rubric gates pass/fail: by weight >= 4 (paper), the dataset flag, or either."""
        by_weight = self.weight >= CRITICAL_WEIGHT
        if rule == "weight":
            return by_weight
        if rule == "flag":
            return self.critical
        return by_weight or self.critical

    def to_vtb(self) -> dict[str, Any]:
        """The rubric's value in a VTB rubric JSON object (its id is the key, not a field)."""
        data = self.model_dump(by_alias=True, exclude={"id"}, exclude_none=True)
        return data


def rubrics_from_vtb(value: str | dict[str, Any] | None) -> list[Rubric]:
    """Parse a VTB rubric object (JSON text or dict keyed by rubric id) into rubrics, in order."""
    if value is None or value == "":
        return []
    data = jsontext.loads(value) if isinstance(value, str) else value
    if not isinstance(data, dict):
        raise ValueError(f"rubrics must be a JSON object keyed by rubric id, got {type(data).__name__}")
    rubrics = []
    for rubric_id, body in data.items():
        if not isinstance(body, dict):
            raise ValueError(f"rubric {rubric_id!r} must be an object, got {type(body).__name__}")
        rubrics.append(Rubric.model_validate({**body, "id": str(rubric_id)}))
    return rubrics


def rubrics_to_vtb(rubrics: list[Rubric]) -> dict[str, Any]:
    """Inverse of :func:`rubrics_from_vtb` (as a dict; ``json.dumps`` it for the dataset)."""
    return {r.id: r.to_vtb() for r in rubrics}


class ToolStep(BaseModel):
    """One step of a reference trajectory: a tool name and its arguments."""

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class TaskImage(BaseModel):
    """An image of a task: on disk (``path``) or in memory (``data``), named ``file`` in task dirs.

    Loaded from a task folder, ``folder`` is set and the file is read strictly inside it
    (:func:`vtb_agents.safefs.read_in_dir`: no ``..``, no symlinks, regular files only).
    """

    file: str
    source_name: str | None = None
    path: Path | None = Field(default=None, exclude=True)
    folder: Path | None = Field(default=None, exclude=True)
    data: bytes | None = Field(default=None, exclude=True, repr=False)

    def read_bytes(self) -> bytes:
        """The encoded image bytes (from memory or disk)."""
        if self.data is not None:
            return self.data
        if self.folder is not None:
            return read_in_dir(self.folder, self.file)
        if self.path is None:
            raise FileNotFoundError(f"image {self.file!r} has neither bytes nor a path")
        return self.path.read_bytes()


class Turn(BaseModel):
    """One user turn: its prompt, the indices of its images in ``Task.images``, golden answer,
    reference trajectory and rubrics.

    ``trajectory_raw`` keeps a dataset trajectory string that is not in our
    ``[{"tool": ..., "args": {...}}]`` form, so that it survives a round trip.
    """

    prompt: str
    images: list[int] = Field(default_factory=list)
    golden_answer: str = ""
    trajectory: list[ToolStep] = Field(default_factory=list)
    trajectory_raw: str | None = None
    rubrics: list[Rubric] = Field(default_factory=list)

    @field_validator("rubrics", mode="before")
    @classmethod
    def _rubrics_vtb(cls, value: Any) -> Any:
        if isinstance(value, (str, dict)):
            return rubrics_from_vtb(value)
        return value

    @field_serializer("rubrics")
    def _dump_rubrics(self, rubrics: list[Rubric]) -> dict[str, Any]:
        return rubrics_to_vtb(rubrics)


ReviewStatus = Literal["draft", "reviewed", "accepted"]
REVIEW_STATUSES: tuple[str, ...] = ("draft", "reviewed", "accepted")


class Review(BaseModel):
    """Where a task is in the authoring pipeline (the paper: written, reviewed twice, accepted)."""

    model_config = ConfigDict(extra="forbid")

    status: ReviewStatus = "draft"
    reviewer: str = ""
    notes: str = ""


class Task(BaseModel):
    """A VisualToolBench task. ``category``/``domain`` are normalised from the raw values.

    ``review`` is the optional authoring block (``vtb tasks new`` writes a draft); it is left out
    of ``task.json`` when absent and travels through parquet as a ``review`` JSON column.
    """

    id: str
    category: str = ""
    category_raw: str = ""
    domain: str = ""
    domain_raw: str = ""
    turns: list[Turn]
    images: list[TaskImage] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    review: Review | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="after")
    def _normalise(self) -> Task:
        if not self.category_raw:
            self.category_raw = self.category
        if not self.domain_raw:
            self.domain_raw = self.domain
        self.category = normalize_category(self.category_raw)
        self.domain = normalize_domain(self.domain_raw)
        return self

    @property
    def turncase(self) -> str:
        """``single-turn`` or ``multi-turn``, as the dataset's ``turncase`` column."""
        return "single-turn" if len(self.turns) == 1 else "multi-turn"

    @property
    def rubrics(self) -> list[tuple[int, Rubric]]:
        """Every rubric of every turn with its 0-based turn index (multi-turn tasks pool them)."""
        return [(i, r) for i, turn in enumerate(self.turns) for r in turn.rubrics]

    def image_name(self, index: int) -> str:
        """The sandbox file name of flat image ``index`` (DESIGN: ``image_{i}.png``)."""
        return f"image_{index}.png"
