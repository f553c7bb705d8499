"""`cmx pareto`: an MLPerf Endpoints v1.0 curve (fixed-concurrency points over derived regions), cmx's client."""
