"""Metrics shared by benchmarks (ROUGE), accuracy.txt as the checker reads it, and the sandbox code benchmarks
run programs in."""
