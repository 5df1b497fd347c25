"""docs/ builds with Sphinx with warnings as errors, its reference pages are generated from the code, and the
guard fails when a page breaks (a planted dangling link and toctree entry must be reported)."""
from __future__ import annotations

import html as html_module
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SPHINX = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "dirhtml"]
# Pages at the time of the split of the README (index, quickstart, 5 concepts, 13 how-to and 8 scenarios, 7
# operations, 4 reference + the spec schema page, limits, 2 development, 2 task pages): a page that silently
# drops out of the build lowers the count.
MIN_PAGES = 48


def _build(source: pathlib.Path, out: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SPHINX, str(source), str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def site(module_tmp) -> pathlib.Path:
    out = module_tmp.mktemp("site")
    done = _build(DOCS, out)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    assert done.stderr.strip() == "", done.stderr  # -q: nothing but warnings would be printed here
    return out


def _text(site: pathlib.Path, page: str) -> str:
    html = (site / page / "index.html").read_text()
    return html_module.unescape(re.sub(r"<[^>]+>", "", html))


def test_the_docs_build_with_warnings_as_errors_and_every_page(site):
    pages = sorted(p.parent.relative_to(site).as_posix() for p in site.rglob("index.html"))
    assert len(pages) >= MIN_PAGES, pages
    for page in ("quickstart", "reference/spec", "reference/constructs", "reference/cli", "limits",
                 "text-tasks", "image-audio-tasks", "howto/single-model", "howto/multi-model",
                 "howto/inference-components"):
        assert page in pages


def test_the_spec_reference_lists_every_spec_class_and_field_from_the_schema(site):
    from deployment_spec.json_schema import spec_schema

    text = _text(site, "reference/spec")
    schema = spec_schema()
    classes = [name for name in schema["$defs"] if not (name.endswith("Patch") and name[:-5] in schema["$defs"])]
    assert len(classes) >= 30
    for name in classes:
        assert name in text, name
        for key in schema["$defs"][name].get("properties", {}):
            assert key in text, f"{name}.{key}"
    # a bound, a default and a rule between fields, as the loader's definitions say them
    assert "max_instances" in text and "an integer >= min_instances ({min_instances})" in text


def test_the_cli_reference_has_every_subcommand_and_option_of_the_parsers(site):
    import argparse

    from tritonsm.cli import build_parser

    text = _text(site, "reference/cli")
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(sub.choices) >= 8  # validate, schema, build, serve, invoke, bench, smoke, verify
    for name, parser in sub.choices.items():
        assert f"tritonsm {name}" in text, name
        for action in parser._actions:
            for option in action.option_strings:
                assert option in text, f"tritonsm {name} {option}"


def _undocumented(names: list[str], package: str, source: str, text: str) -> list[str]:
    """The public names without an autodoc entry on their reference page (its source), or absent from the page
    as built (its text)."""
    return [name for name in names
            if not re.search(rf"^\.\. auto\w+:: {re.escape(package)}\.{re.escape(name)}$", source, re.M)
            or name not in text]


REFERENCE_PAGES = [("triton_constructs", "reference/constructs", 10), ("deployment_spec", "reference/spec-api", 10),
                   ("stacks", "reference/spec-app", 7), ("local_endpoint", "reference/local-endpoint", 15)]


def _packages_without_reference(root: pathlib.Path) -> list[str]:
    """The top-level packages under ``root`` that declare public names (``__all__``) and have no reference page."""
    paged = {package for package, _, _ in REFERENCE_PAGES}
    return sorted(p.parent.name for p in root.glob("*/__init__.py")
                  if "__all__" in p.read_text() and p.parent.name not in paged)


def test_every_package_with_public_names_has_a_reference_page(tmp_path):
    assert _packages_without_reference(ROOT) == []
    assert len(REFERENCE_PAGES) >= 4
    (tmp_path / "new_package").mkdir()
    (tmp_path / "new_package" / "__init__.py").write_text('__all__ = ["Thing"]\n')  # planted: a page missing
    assert _packages_without_reference(tmp_path) == ["new_package"]


@pytest.mark.parametrize("package, page, floor", REFERENCE_PAGES)
def test_every_public_name_has_a_reference_entry(site, package, page, floor):
    import importlib

    names = list(importlib.import_module(package).__all__)
    assert len(names) >= floor
    assert _undocumented(names, package, (DOCS / f"{page}.md").read_text(), _text(site, page)) == []


def test_the_reference_check_reports_a_public_name_left_out():
    source = ".. autoclass:: triton_constructs.Scaling\n.. autoclass:: triton_constructs.Alarms\n"
    assert _undocumented(["Scaling", "Alarms", "Asynchronous"], "triton_constructs", source,
                         "Scaling ... Alarms ... Asynchronous named in prose") == ["Asynchronous"]


def test_the_pictures_are_in_the_built_pages(site):
    for page, picture in (("concepts/overview", "data-flow.svg"), ("concepts/deployed", "stage-resources.svg")):
        html = (site / page / "index.html").read_text()
        assert re.search(rf'<img [^>]*src="[^"]*{picture}"', html), page
        assert (site / "_images" / picture).is_file()


def test_the_changelog_is_on_the_site(site):
    text = _text(site, "changelog")
    assert "[Unreleased]" in text and "Keep a Changelog" in text


def test_the_construct_reference_documents_props_and_public_methods(site):
    text = _text(site, "reference/constructs")
    for name in ("TritonSageMakerEndpoint", "TritonComponentsEndpoint", "grant_invoke", "metric_model_latency",
                 "from_manifest", "max_rps_per_instance", "instance_type"):
        assert name in text, name


def test_the_guard_reports_a_dangling_link_and_a_missing_toctree_entry(tmp_path):
    broken = tmp_path / "docs"
    shutil.copytree(DOCS, broken, ignore=shutil.ignore_patterns("_build", "__pycache__"))
    # MyST resolves include paths relative to the page: the copy's quickstart includes ../README.md
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copy(ROOT / "triton.yaml", tmp_path / "triton.yaml")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (broken / "limits.md").write_text((broken / "limits.md").read_text() + "\nSee [gone](howto/no-such-page.md).\n")
    (broken / "index.md").write_text((broken / "index.md").read_text().replace("limits\n", "limits\nno-such-page\n", 1))
    done = _build(broken, tmp_path / "out")
    assert done.returncode != 0
    assert "no-such-page" in done.stderr and "toctree contains reference to nonexisting document" in done.stderr
    assert "limits.md" in done.stderr and "howto/no-such-page.md" in done.stderr


def test_the_readme_is_a_front_page_whose_links_resolve():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert len(targets) >= 30
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert missing == []


def test_every_placeholder_of_the_generated_references_shows_on_the_page(site):
    sys.path.insert(0, str(DOCS / "_ext"))
    import cli_reference
    import spec_reference
    from visible_text import placeholders

    found = 0
    for page, module in (("reference/spec", spec_reference), ("reference/cli", cli_reference)):
        text = _text(site, page)
        wanted = placeholders(html_module.unescape(module.render()))
        found += len(wanted)
        assert {p for p in wanted if p not in text} == set(), page
    assert found >= 10   # a floor (13 distinct on the two pages on 2026-11-29): <project>, <environment>, <model>...


def test_a_placeholder_written_raw_is_hidden_by_the_renderer_and_shown_once_made_visible():
    # The defect the check above guards against, planted: MyST's parser (markdown-it) passes <project> on as HTML.
    from markdown_it import MarkdownIt

    sys.path.insert(0, str(DOCS / "_ext"))
    from visible_text import visible

    def shown(markdown: str) -> str:
        return html_module.unescape(re.sub(r"<[^>]+>", "", MarkdownIt("commonmark").render(markdown)))

    line = "the first part of each stage ID (<project><environment>), as `<project>` in code"
    assert shown(line) == "the first part of each stage ID (), as <project> in code\n"
    assert shown(visible(line)) == "the first part of each stage ID (<project><environment>), as <project> in code\n"


def _without_page(examples: list[str], pages: str) -> list[str]:
    return [name for name in examples if f"examples/{name}.yaml" not in pages]


def test_every_example_spec_has_a_scenario_page():
    pages = "\n".join(p.read_text() for p in (DOCS / "howto" / "scenarios").glob("*.md"))
    examples = sorted(p.stem for p in (ROOT / "examples").glob("*.yaml"))
    assert len(examples) >= 10 and _without_page(examples, pages) == []
    assert _without_page(["ensemble-sme", "a-new-example"], pages) == ["a-new-example"]   # the check can fail
