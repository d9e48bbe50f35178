"""Baseline solution folder: see manifest.json and kernel.py."""
