"""Tasks as a LangSmith dataset: one example per task, its images as example attachments.

Example contract (what :func:`vtb_agents.judges.evaluator.make_rubric_evaluator` reads):

* ``inputs``: ``{"task_id", "prompts": [str per turn], "images": [[attachment names] per turn],
  "category", "domain", "turncase"}``: no image bytes;
* ``outputs`` (reference): the task as ``Task.model_dump(mode="json")`` (images by file name);
* ``attachments``: ``image_<i>`` (flat image index ``i``), the task's original image bytes;
* ``metadata``: ``task_id``, ``category``, ``domain``, ``turncase``.

Example ids are derived from the dataset id and the task id, so pushing again adds only new tasks.
"""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import langsmith
from langsmith import schemas
from PIL import Image, UnidentifiedImageError

from vtb_agents.version import __version__
from vtb_agents.tasks.model import Task
from vtb_agents.tracing import default_client

EXAMPLE_NAMESPACE = uuid.UUID("5b0f3c57-8f6e-4a43-9d7e-6a1f0b8f3d21")


def attachment_name(index: int) -> str:
    """The attachment name of flat image ``index`` (attachment names may not contain dots)."""
    return f"image_{index}"


def image_mime_type(data: bytes) -> str:
    """The MIME type of encoded image bytes (``application/octet-stream`` if unknown)."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return Image.MIME.get(image.format or "", "application/octet-stream")
    except (UnidentifiedImageError, OSError):
        return "application/octet-stream"


def reference_outputs(task: Task) -> dict[str, Any]:
    """The task as the dataset stores it (a JSON round trip of ``Task.model_dump(mode="json")``)."""
    return json.loads(json.dumps(task.model_dump(mode="json")))


def example_inputs(task: Task) -> dict[str, Any]:
    """What the target sees of a task: ids and prompts, images by attachment name."""
    return {"task_id": task.id, "prompts": [t.prompt for t in task.turns],
            "images": [[attachment_name(i) for i in t.images] for t in task.turns],
            "category": task.category, "domain": task.domain, "turncase": task.turncase}


def example_id(dataset_id: uuid.UUID | str, task_id: str) -> uuid.UUID:
    """The id of ``task_id``'s example in dataset ``dataset_id``."""
    return uuid.uuid5(EXAMPLE_NAMESPACE, f"{dataset_id}/{task_id}")


def task_example(task: Task, dataset_id: uuid.UUID | str) -> schemas.ExampleCreate:
    """The dataset example of ``task``, its images as attachments."""
    attachments: dict[str, Any] = {}
    for index, image in enumerate(task.images):
        data = image.read_bytes()
        attachments[attachment_name(index)] = {"mime_type": image_mime_type(data), "data": data}
    return schemas.ExampleCreate(
        id=example_id(dataset_id, task.id), inputs=example_inputs(task), reference_outputs=reference_outputs(task),
        metadata={"task_id": task.id, "category": task.category, "domain": task.domain,
                  "turncase": task.turncase, "vtb_agents": __version__},
        attachments=attachments or None)


@dataclass
class PushResult:
    """What :func:`push_dataset` did."""

    dataset_id: uuid.UUID
    name: str
    created: bool
    added: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)


def push_dataset(tasks: Sequence[Task], name: str, *, client: langsmith.Client | None = None,
                 description: str | None = None) -> PushResult:
    """Create dataset ``name`` (or reuse it) and add an example for each task not yet in it.

    Raises ValueError if the dataset already holds a task whose reference differs from ``tasks``
    (grading would then use the stale version): push to a new name instead.
    """
    client = client or default_client()
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate task ids: " + ", ".join(sorted({i for i in ids if ids.count(i) > 1})))
    if client.has_dataset(dataset_name=name):
        dataset, created = client.read_dataset(dataset_name=name), False
    else:
        dataset = client.create_dataset(
            name, description=description or f"VisualToolBench tasks ({len(tasks)}) pushed by vtb-agents",
            data_type=schemas.DataType.kv, metadata={"source": "vtb-agents", "vtb_agents": __version__})
        created = True
    existing = {} if created else {str((e.inputs or {}).get("task_id")): e
                                   for e in client.list_examples(dataset_id=dataset.id)}
    stale = sorted(t.id for t in tasks if t.id in existing and existing[t.id].outputs != reference_outputs(t))
    if stale:
        raise ValueError(f"dataset {name!r} holds other versions of task(s) {', '.join(stale)}; "
                         "push them under a new dataset name")
    new = [t for t in tasks if t.id not in existing]
    if new:
        client.create_examples(dataset_id=dataset.id, examples=[task_example(t, dataset.id) for t in new])
    return PushResult(dataset_id=dataset.id, name=name, created=created, added=[t.id for t in new],
                      present=[t.id for t in tasks if t.id in existing])


def task_from_example(example: schemas.Example) -> Task:
    """The task an example holds, its image bytes read from the example's attachments.

    The example must have been listed with ``include_attachments=True``.
    """
    task = Task.model_validate(example.outputs or {})
    attachments = example.attachments or {}
    for index, image in enumerate(task.images):
        found = attachments.get(attachment_name(index))
        if found is None:
            raise ValueError(f"example {example.id} (task {task.id}) has no attachment {attachment_name(index)!r}")
        image.data = found["reader"].read()
    return task


def dataset_examples(name: str, *, client: langsmith.Client | None = None,
                     task_ids: Iterable[str] | None = None,
                     include_attachments: bool = False) -> list[schemas.Example]:
    """The examples of dataset ``name`` (only those of ``task_ids`` if given, in that order)."""
    client = client or default_client()
    examples = list(client.list_examples(dataset_name=name, include_attachments=include_attachments))
    if task_ids is None:
        return examples
    by_task = {str((e.inputs or {}).get("task_id")): e for e in examples}
    wanted = list(task_ids)
    missing = [t for t in wanted if t not in by_task]
    if missing:
        raise ValueError(f"dataset {name!r} has no example for task(s) {', '.join(missing)}")
    return [by_task[t] for t in wanted]
