"""One package per MLPerf benchmark: its names, dataset, generation settings, accuracy and tiny generator."""
