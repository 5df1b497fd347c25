"""scripts/pip_sources_for_uv.py: uv reads the package sources pip is configured with (the bootstrap's installer)."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("pip_sources_for_uv", ROOT / "scripts" / "pip_sources_for_uv.py")
assert spec is not None and spec.loader is not None
sources = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sources)


def test_each_configured_source_becomes_its_uv_flag_and_the_environment_overrides_the_files():
    listed = "\n".join([
        ":env:.find-links='/opt/wheels'",
        ":env:.cert='/etc/ssl/certs/ca-certificates.crt'",
        "global.constraint='/etc/xdg/pip/constraints.txt'",
        "global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'",
        "global.find-links='/somewhere/else'",
        "user.index-url='https://mirror.example/simple'",
    ])
    assert sources.uv_flags(listed) == [
        "--index-strategy", "unsafe-best-match", "--find-links", "/opt/wheels",
        "--constraint", "/etc/xdg/pip/constraints.txt",
        "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
        "--index-url", "https://mirror.example/simple"]


def test_no_configuration_leaves_uv_its_defaults_but_pips_index_merging():
    assert sources.uv_flags("") == ["--index-strategy", "unsafe-best-match"]
