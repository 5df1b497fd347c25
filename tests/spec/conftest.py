"""The spec tests' helpers (spec_mutations) importable by their tests."""
import pathlib
import sys

HERE = pathlib.Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
