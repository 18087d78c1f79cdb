"""The task model at its boundaries: the critical rule at a weight of exactly 4 (and 3), the dataset's
yes/no flags, a check's required fields, rubrics to and from the dataset's JSON, a task image from
memory, a folder or a path, and the task's derived fields. Part of ``make mutation`` (docs/development.md):
which rubrics gate a pass is a reported figure (APR)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from vtb_agents.tasks.model import Check, Rubric, Task, TaskImage, Turn, rubrics_from_vtb, rubrics_to_vtb


def rubric(weight: int, critical: object = "no") -> Rubric:
    return Rubric.model_validate({"id": "r", "description": "d", "weight": weight, "critical": critical})


@pytest.mark.parametrize("weight, flag, by_weight, by_flag, either", [
    (4, "no", True, False, True),  # exactly the paper's threshold: critical by weight
    (3, "no", False, False, False),  # just under it
    (5, "no", True, False, True),
    (3, "yes", False, True, True),  # the dataset's flag alone
    (4, "yes", True, True, True),
])
def test_the_critical_rule_at_a_weight_of_exactly_four(weight, flag, by_weight, by_flag, either):
    r = rubric(weight, flag)
    assert (r.is_critical(), r.is_critical("weight"), r.is_critical("flag"), r.is_critical("either")) == (
        by_weight, by_weight, by_flag, either)


@pytest.mark.parametrize("value, parsed", [
    ("yes", True), (" Y ", True), ("TRUE", True), ("1", True), (1, True), (True, True),
    ("no", False), ("N", False), ("false", False), ("0", False), ("", False), (0, False), (False, False),
])
def test_yes_no_flags_of_the_dataset(value, parsed):
    r = Rubric.model_validate({"id": "r", "description": "d", "weight": 1, "critical": value, "final_answer": value})
    assert (r.critical, r.final_answer) == (parsed, parsed)


def test_a_flag_that_is_neither_yes_nor_no_names_the_value():
    with pytest.raises(ValidationError, match=r"expected 'yes' or 'no', got 'maybe'"):
        rubric(1, "maybe")


@pytest.mark.parametrize("check, message", [
    ({"type": "contains_any"}, "check type 'contains_any' needs a non-empty 'values' list"),
    ({"type": "contains_all", "values": []}, "check type 'contains_all' needs a non-empty 'values' list"),
    ({"type": "not_contains"}, "check type 'not_contains' needs a non-empty 'values' list"),
    ({"type": "number"}, "check type 'number' needs 'value'"),
    ({"type": "regex"}, "check type 'regex' needs 'pattern'"),
    ({"type": "regex", "pattern": ""}, "check type 'regex' needs 'pattern'"),
    ({"type": "number", "value": 1, "tolerance": -0.5}, "check 'tolerance' must be >= 0"),
    ({"type": "regex", "pattern": "(unclosed"}, "check 'pattern' is not a valid regular expression: missing )"),
    ({"type": "contains_any", "values": ["a"], "pattern": "["}, "check 'pattern' is not a valid regular expression"),
])
def test_a_check_without_what_its_type_needs_says_what(check, message):
    with pytest.raises(ValidationError) as raised:
        Check.model_validate(check)
    assert message in str(raised.value)


@pytest.mark.parametrize("check", [
    {"type": "contains_any", "values": ["a"]}, {"type": "number", "value": 0.0}, {"type": "number", "value": 3,
                                                                                  "tolerance": 0.0},
    {"type": "regex", "pattern": "4[0-9]"}, {"type": "contains_all", "values": ["a"], "pattern": "b"},
])
def test_a_check_with_what_its_type_needs_is_valid(check):
    assert Check.model_validate(check).type == check["type"]


def test_rubrics_round_trip_through_the_datasets_json_with_unknown_keys_and_one_category():
    text = ('{"r1": {"description": "Says 42", "weight": 5, "critical": "yes", "category": "visual", '
            '"objective/subjective": "objective", "extra": 7}, "7": {"description": "Short", "weight": 1}}')
    first, second = rubrics_from_vtb(text)
    assert (first.id, first.categories, first.objectivity, first.model_extra) == ("r1", ["visual"], "objective",
                                                                                  {"extra": 7})
    assert (second.id, second.critical, second.categories) == ("7", False, [])
    assert rubrics_to_vtb([first, second]) == {
        "r1": {"description": "Says 42", "weight": 5, "objective/subjective": "objective", "explicit/implicit": "",
               "category": ["visual"], "critical": "yes", "final_answer": "no", "extra": 7},
        "7": {"description": "Short", "weight": 1, "objective/subjective": "", "explicit/implicit": "",
              "category": [], "critical": "no", "final_answer": "no"}}
    assert rubrics_from_vtb(rubrics_to_vtb([first, second])) == [first, second]
    assert rubrics_from_vtb(None) == [] and rubrics_from_vtb("") == [] and rubrics_from_vtb({}) == []


def test_rubrics_that_are_not_an_object_of_objects_are_refused_by_name():
    with pytest.raises(ValueError, match="rubrics must be a JSON object keyed by rubric id, got list"):
        rubrics_from_vtb("[1, 2]")
    with pytest.raises(ValueError, match="rubric 'r1' must be an object, got str"):
        rubrics_from_vtb({"r1": "weight 5"})


def test_a_turn_takes_rubrics_as_the_datasets_json_text_or_object_and_writes_the_object():
    as_text = Turn.model_validate({"prompt": "p", "rubrics": '{"r1": {"description": "d", "weight": 4}}'})
    as_object = Turn.model_validate({"prompt": "p", "rubrics": {"r1": {"description": "d", "weight": 4}}})
    as_list = Turn(prompt="p", rubrics=[Rubric(id="r1", description="d", weight=4)])
    assert as_text.rubrics == as_object.rubrics == as_list.rubrics
    assert as_text.rubrics[0].is_critical()
    assert as_text.model_dump()["rubrics"] == {"r1": {"description": "d", "weight": 4, "objective/subjective": "",
                                                      "explicit/implicit": "", "category": [], "critical": "no",
                                                      "final_answer": "no"}}


def test_a_task_image_is_read_from_memory_then_its_folder_then_its_path(tmp_path: Path):
    (tmp_path / "a.png").write_bytes(b"folder")
    (tmp_path / "b.png").write_bytes(b"path")
    assert TaskImage(file="a.png", data=b"memory", folder=tmp_path, path=tmp_path / "b.png").read_bytes() == b"memory"
    assert TaskImage(file="a.png", folder=tmp_path, path=tmp_path / "b.png").read_bytes() == b"folder"
    assert TaskImage(file="a.png", path=tmp_path / "b.png").read_bytes() == b"path"
    with pytest.raises(FileNotFoundError, match="image 'a.png' has neither bytes nor a path"):
        TaskImage(file="a.png").read_bytes()


def test_a_task_normalises_its_category_and_domain_and_keeps_the_raw_values():
    task = Task(id="t", category="Region Switch Q&A", domain="Finance", turns=[Turn(prompt="p")])
    assert (task.category, task.category_raw, task.domain_raw) == ("region_switch", "Region Switch Q&A", "Finance")
    again = Task.model_validate(task.model_dump())
    assert (again.category, again.category_raw, again.domain, again.domain_raw) == (
        task.category, "Region Switch Q&A", task.domain, "Finance")
    raw = Task(id="t", category="x", category_raw="Region Switch Q&A", domain="y", domain_raw="Finance",
               turns=[Turn(prompt="p")])
    assert (raw.category, raw.domain) == (task.category, task.domain)  # the raw value decides


def test_a_tasks_turncase_rubrics_and_image_names():
    one = Turn(prompt="p", rubrics=[Rubric(id="a", description="d", weight=1),
                                    Rubric(id="b", description="d", weight=4)])
    two = Turn(prompt="q", rubrics=[Rubric(id="c", description="d", weight=2)])
    task = Task(id="t", turns=[one, two])
    assert task.turncase == "multi-turn" and Task(id="t", turns=[one]).turncase == "single-turn"
    assert [(turn, r.id) for turn, r in task.rubrics] == [(0, "a"), (0, "b"), (1, "c")]
    assert task.image_name(3) == "image_3.png"
