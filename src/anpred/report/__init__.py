"""Reports of a run: a terminal summary and a self-contained HTML page with plots.

Importing this package imports neither matplotlib nor any DL library; the plots import
matplotlib when they are drawn.
"""

from anpred.report.html import write_report
from anpred.report.run_summary import RunSummary
from anpred.report.terminal import print_summary

__all__ = ["RunSummary", "print_summary", "write_report"]
