"""Published MLPerf Inference results as the yardstick: a round's table (fetch.py, table.py), accelerator names
matched across submitters (accelerators.py), a cmx run placed among its peers (compare.py), costs at a price
the user gives (cost.py), and `cmx results`'s answer (answer.py, text.py). docs/results.md is the guide."""
