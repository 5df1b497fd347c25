"""Mutations of a raw (parsed YAML) spec, for the tests that feed the validator one mistake at a time."""


def set_path(path: str, value):
    """A mutation that sets the dotted ``path`` (``a.b.c``) of the raw spec to ``value``."""
    def mutate(raw):
        *parents, leaf = path.split(".")
        for key in parents:
            raw = raw[key]
        raw[leaf] = value
    return mutate


def all_of(*mutations):
    """A mutation that applies ``mutations`` in order."""
    def mutate(raw):
        for m in mutations:
            m(raw)
    return mutate
