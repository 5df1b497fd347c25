"""`tritonsm verify --gpu`: the built artifacts on a CUDA host without Docker (see run.py for the checks)."""
