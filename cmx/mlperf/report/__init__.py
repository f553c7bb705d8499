"""`cmx report`: results folders as one self-contained HTML page (collect reads, plots draws, page writes)."""
