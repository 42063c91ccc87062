"""Benchmarks of how cost grows with size: stores of 1,000 to 100,000 trials."""
