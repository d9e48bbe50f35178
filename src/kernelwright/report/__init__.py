"""Summaries, terminal tables and HTML reports of bench results (reads traces; writes nothing else)."""

from kernelwright.report.summary import summarize

__all__ = ["summarize"]
