"""Duplicate result lines of a run with epochs: the warning names the epoch of each ignored line.
Part of ``make mutation`` (docs/development.md), beside ``tests/test_results_store.py``."""

from __future__ import annotations

import logging

import pytest

from support.result_lines import result_line
from vtb_agents.rundir.store import latest_results


def test_an_ignored_duplicate_of_a_later_epoch_is_named_with_its_epoch(caplog: pytest.LogCaptureFixture):
    lines = [result_line("a", score=1.0, passed=True, epoch=1), result_line("a", score=0.0, passed=False, epoch=2),
             result_line("a", score=1.0, passed=True, epoch=2), result_line("b", score=1.0, passed=True, epoch=1),
             result_line("b", score=0.0, passed=False, epoch=1)]
    with caplog.at_level(logging.WARNING):
        kept = latest_results(lines, source="results.jsonl")
    assert [(r.task_id, r.epoch, r.grade.passed) for r in kept] == [("a", 1, True), ("a", 2, False), ("b", 1, True)]
    assert caplog.messages == ["results.jsonl: 2 duplicate line(s) for task(s) a (epoch 2), b ignored "
                               "(the first record of each is used)"]
