"""Scenes and task builders of the bundled sample suite (see ``vtb_agents.tasks.sample_suite``)."""
