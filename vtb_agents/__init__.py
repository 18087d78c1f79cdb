"""vtb-agents: VisualToolBench as LangGraph state graphs.

Public entry points live in the subpackages: ``vtb_agents.tasks`` (task model and
loaders), ``vtb_agents.tools`` (sandbox and tools), ``vtb_agents.graphs`` (agent
graphs), ``vtb_agents.judges`` (rubric judges), ``vtb_agents.analysis`` (metrics)
and ``vtb_agents.runner`` (batch runs).
"""

__version__ = "0.1.0"
