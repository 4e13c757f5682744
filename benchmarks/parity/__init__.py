"""The parity tool: FaceFusion's own run against the farm's, on the same target and options (`python -m
benchmarks.parity`), and its matrix (`make bench-parity`, benchmarks/parity_matrix.py)."""
