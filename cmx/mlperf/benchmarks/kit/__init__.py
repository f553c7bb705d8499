"""What benchmarks share, beside their Protocol (base.py): the defaults a benchmark package reuses.

A benchmark package holds only what is its own (prompts, scoring, references); reading a frame,
checking token arrays, writing random weights, training a tokenizer, downloading a pinned model
and the dataset step live here once, in the manner of pre-commit's `lang_base`.
"""
