"""Tests of kernelwright.baselines."""
