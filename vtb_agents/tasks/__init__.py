"""Tasks: the model, loaders (task folders, VTB parquet, HF datasets), validation, the sample suite."""

from vtb_agents.tasks.errors import Problem, TaskLoadError
from vtb_agents.tasks.model import Check, Rubric, Task, TaskImage, ToolStep, Turn
from vtb_agents.tasks.sources import SAMPLE, iter_source, load_tasks

__all__ = ["SAMPLE", "Check", "Problem", "Rubric", "Task", "TaskImage", "TaskLoadError", "ToolStep", "Turn",
           "iter_source", "load_tasks"]
