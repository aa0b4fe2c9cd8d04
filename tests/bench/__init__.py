"""Benchmarks (make bench); never collected by pytest."""
