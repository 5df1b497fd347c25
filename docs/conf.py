"""Sphinx configuration: MyST Markdown pages, the furo theme, and the reference pages generated from the code
(`_ext/spec_reference.py`, `_ext/cli_reference.py`, autodoc over triton_constructs). Built by `make docs` and
by tests/docs/test_docs_build.py with warnings as errors."""
from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE / "_ext")]
# jsii runs aws-cdk-lib in Node when autodoc imports triton_constructs: importing stacks points it at the venv's
# pinned Node first, as the app does.
import stacks  # noqa: E402,F401

project = "Triton on SageMaker, as code"
html_show_copyright = False  # no holder is named anywhere: the footer showed a bare "Copyright ©"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "spec_reference", "cli_reference"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "README.md"]
html_theme = "furo"
html_title = project
# Headings get anchors, so pages link to sections as `page.md#section`.
myst_heading_anchors = 3
# A link to a repository file outside docs/ (a spec, a test) is not a page: MyST then warns, which -W turns into
# a failure; such references are written as code (`examples/...`), not links.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}
