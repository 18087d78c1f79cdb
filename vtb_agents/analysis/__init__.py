"""Analyses of benchmark runs: metrics over model answers and tool calls."""
