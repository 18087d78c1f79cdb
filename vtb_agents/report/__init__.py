"""HTML report of a run (``report.html`` and a page per task), comparison of runs, and plots (see
:func:`write_report`, :func:`compare_runs`; :func:`preparing_report` makes a report's images during the run)."""

from vtb_agents.report.compare import Comparison, compare_runs, write_comparison, write_comparison_page
from vtb_agents.report.html import write_report
from vtb_agents.report.prepare import ReportPreparer, preparing_report
from vtb_agents.rundir.read import ReportError

__all__ = ["Comparison", "ReportError", "ReportPreparer", "compare_runs", "preparing_report", "write_comparison",
           "write_comparison_page", "write_report"]
