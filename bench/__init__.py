"""Benchmarks and their results (bench/RESULTS.md); never part of the tests."""
