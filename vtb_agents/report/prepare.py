"""The report's image files made while a run goes on, so that ``report.html`` is quick at its end.

Decoding and shrinking the images (the tasks' own and the tools' outputs) is nearly all of a report's cost:
several milliseconds per image, about 1 s for 64 tasks of the sample suite, against well under 0.1 s for the
page. A :class:`ReportPreparer` makes those files in one background thread while the tasks wait on their
models: the tasks' own images from the start, each result's images as the result arrives (those of its task
page: the tool images and, from the task's transcript, every image sent to the model and every image a
strategy step made). :func:`~vtb_agents.report.html.write_report` then finds them on disk (files are named by
content) and only writes the pages; whatever is not prepared yet it makes itself, so preparing is purely a
head start and never changes the report. :func:`preparing_report` wires a preparer into a run's progress
callback (``vtb run`` and :func:`vtb_agents.evaluate` both use it).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Sequence

from vtb_agents.report.images import ReportImages
from vtb_agents.report.task_page import TaskPage
from vtb_agents.report.transcript_html import turn_images
from vtb_agents.results import TaskResult
from vtb_agents.tasks.model import Task

ProgressFn = Callable[[TaskResult, int, int], None]
"""A run's progress callback: (result, tasks done, tasks in the run)."""

log = logging.getLogger(__name__)
NICENESS = 10
"""How much lower the preparing thread's CPU priority is than the run's (Linux: threads have their own)."""


class ReportPreparer:
    """Makes the report images of ``tasks`` and of each :meth:`add`-ed result in a background thread.

    Use as a context manager around the run; leaving it waits for the queued work (or, after an
    exception, only for the image being made).
    """

    def __init__(self, run_dir: Path | str, tasks: Sequence[Task]) -> None:
        self.images = ReportImages(Path(run_dir))
        self.tasks = {task.id: task for task in tasks}
        self._queue: queue.SimpleQueue[TaskResult | Task | None] = queue.SimpleQueue()
        for task in tasks:
            self._queue.put(task)
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._work, name="vtb-report-images", daemon=True)
        self._thread.start()

    def add(self, result: TaskResult) -> None:
        """Queue the images of a finished task's result (returns at once; safe from any thread)."""
        self._queue.put(result)

    def close(self, *, cancel: bool = False) -> None:
        """Wait until everything queued is made (``cancel``: stop after the current image)."""
        if cancel:
            self._cancelled.set()
        self._queue.put(None)
        self._thread.join()

    def __enter__(self) -> ReportPreparer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(cancel=exc is not None)

    def _work(self) -> None:
        if hasattr(os, "setpriority"):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
        while not self._cancelled.is_set() and (item := self._queue.get()) is not None:
            try:
                self._prepare(item)
            except Exception:  # a head start only: write_report makes the same files and reports errors
                log.warning("report images of %s not prepared in advance",
                            item.task_id if isinstance(item, TaskResult) else item.id, exc_info=True)

    def _prepare(self, item: TaskResult | Task) -> None:
        if isinstance(item, Task):
            for index in range(len(item.turns)):
                for image, name in turn_images(item, index):
                    self.images.from_task(image, name)
        else:  # the page's HTML is dropped: making it makes exactly the images the page shows
            TaskPage(item, self.tasks.get(item.task_id), cost=None).html(self.images)


@contextmanager
def preparing_report(run_dir: Path, tasks: Sequence[Task], progress: ProgressFn | None = None) -> Iterator[ProgressFn]:
    """``progress`` (if any), which also makes the report's images in the background from the first result
    on (:class:`ReportPreparer`), so that the report is quick once the run ends. It starts only then: by
    its first result the run directory is checked and locked as this run's."""
    with ExitStack() as stack:
        preparers: list[ReportPreparer] = []

        def on_result(result: TaskResult, done: int, total: int) -> None:
            if progress is not None:
                progress(result, done, total)
            if not preparers:
                preparers.append(stack.enter_context(ReportPreparer(run_dir, tasks)))
            preparers[0].add(result)

        yield on_result
