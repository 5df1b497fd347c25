#!/usr/bin/env python3
"""Load check of a local single-model endpoint (tritonsm/benchmarking/load_local.py has the details).

    .venv/bin/python benchmarks/load_local.py [--endpoint classifier --cpu-stand-in]
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tritonsm.benchmarking.load_local import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
