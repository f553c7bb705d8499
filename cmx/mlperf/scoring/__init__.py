"""Metrics shared by benchmarks (ROUGE), accuracy.txt as the checker reads it, the sandbox code benchmarks run
programs in, and VBench's score read from the results it writes in its own environment."""
