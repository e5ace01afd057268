"""Benchmarks: each module prints its figures and writes JSON under bench/results/."""
