"""Metrics shared by benchmarks (ROUGE) and accuracy.txt as the checker reads it."""
