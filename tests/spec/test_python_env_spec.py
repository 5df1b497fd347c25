"""The python: section of a Python-backend model: where its packages come from, each mistake named."""
import copy
import pathlib

import pytest
import yaml

from deployment_spec import SpecError
from deployment_spec.sections.requirements import is_pinned, requirement_lines
from deployment_spec.spec import parse_spec

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())


def _message(python: dict) -> str:
    raw = copy.deepcopy(BASE)
    raw["models"]["preprocess"]["python"] = python
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, pathlib.Path("spec.yaml"))
    return str(caught.value)


def test_a_requirement_that_is_not_pinned_is_named_with_its_index():
    assert _message({"requirements": ["numpy==1.26.4", "transformers>=4.40"]}) == (
        "spec.yaml: 1 problem\n  - models.preprocess.python.requirements[1]: got 'transformers>=4.40'; allowed: "
        "name==version (optionally name[extra]==version ; marker), one release per line; fix: pin one release, "
        "e.g. 'transformers==4.46.3' (pip index versions NAME lists them)")


def test_two_sources_of_packages_at_once_are_refused():
    assert _message({"requirements": ["numpy==1.26.4"], "execution_env": "env.tar.gz"}) == (
        "spec.yaml: 1 problem\n  - models.preprocess.python: got requirements and execution_env together; "
        "allowed: one of requirements, requirements_file or execution_env; fix: keep the one the environment "
        "should come from")


@pytest.mark.parametrize("line", ["numpy==1.26.4", "torch == 2.13.0", "transformers[torch]==5.23.0",
                                  "numpy==1.26.4 ; python_version >= '3.10'", "torch==2.13.0+cpu",
                                  "numpy==1.26.4  # why it is here"])
def test_pins_are_accepted(line):
    assert is_pinned(line)


@pytest.mark.parametrize("line", ["numpy", "numpy>=1.26", "numpy~=1.26", "numpy==1.*", "numpy===1.26.4",
                                  "-e ./pkg", "https://example.com/numpy.whl", "numpy==1.26 || true"])
def test_anything_but_one_release_is_not_a_pin(line):
    assert not is_pinned(line)


def test_a_requirements_file_skips_comments_and_blank_lines_and_keeps_line_numbers():
    assert requirement_lines("# header\n\nnumpy==1.26.4\n  # indented comment\nsix==1.16.0\n") == [
        (3, "numpy==1.26.4"), (5, "six==1.16.0")]
