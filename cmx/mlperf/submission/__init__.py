"""MLPerf submission trees: packaging a results folder, the layout, the system description, and checking a tree."""
