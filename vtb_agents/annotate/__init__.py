"""Human rubric labels: ``vtb annotate`` serves a local labelling page for a run's answers.

The labels file is what ``vtb analyze alignment --labels`` reads (:mod:`vtb_agents.analysis.alignment`).
"""
