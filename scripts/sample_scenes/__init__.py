"""Scenes and task builders of the bundled sample suite (see ``scripts/sample_suite.py``)."""
