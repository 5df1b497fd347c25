# The two commands of the README: `make` (set up, build the default models,
# synthesize every environment with cdk-nag) and `make test`.
.PHONY: all setup build synth examples test check compiled schema docs dist clean

all: synth

setup:
	@scripts/bootstrap.sh

build: setup
	.venv/bin/tritonsm build

synth: build
	.venv/bin/cdk synth --quiet

# Every example spec built and synthesized with cdk-nag as its scenario page says, each in build/examples/NAME/
# (scripts/build_examples.py; its tiny checkpoints made first): about 20 minutes on 2 cores, most of it RoBERTa-large
# and BERT-large at their real sizes. TensorRT models are left for a GPU host and named in the summary.
# `make examples ONLY="ensemble-sme t5-python-mme"`: those examples only.
examples: setup compiled
	.venv/bin/python scripts/build_examples.py $(foreach name,$(ONLY),--only $(name))

# Every test, on three workers on the 2-core machine (a test module whole on one, the slowest modules first:
# tests/suite_tiers.py): the tests wait on servers, subprocesses and the network, so two workers kept the cores
# 155 % busy and three 183 % (a fresh clone, 2026-11-28: 18 min 23 s of tests on two, 16 min 28 s on three).
# Each module's time is recorded for `make check`. The folder is named: an xdist worker given no path and no
# terminal on stdin looked for the tests in /tmp (pytest-xdist 3.8.0).
test: setup compiled
	.venv/bin/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder \
		--record-durations .tritonsm/module-durations.json tests

# The edit loop's tier: the modules recorded as fast (the spec, refusals, unit tests), then mypy on what changed.
# A module's time counts the shared session fixtures it uses (tests/suite_tiers.py): counted as free, the modules
# that read the one synthesis of every spec put all three workers to wait on it (3 min 00 s on 2026-11-29).
check: setup compiled
	.venv/bin/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder --tier check -q
	scripts/check_types.sh

# The project's own modules byte-compiled once, on every core (timestamp-checked, so an edit is picked up): where
# PYTHONDONTWRITEBYTECODE=1 is set, as on the CI machine, each of the suite's hundreds of Python processes compiled
# them again (about 0.2 s each). tests/ and examples/ are left alone: their folders are copied into model builds.
compiled: setup
	@.venv/bin/python -m compileall -q -j 0 app.py deployment_spec local_endpoint model_build stacks \
		triton_constructs tritonsm benchmarks > /dev/null

# The spec's JSON Schema (schemas/triton.schema.json), regenerated from deployment_spec after a change to it;
# tests/spec/test_json_schema.py fails while the committed file differs.
schema:
	.venv/bin/tritonsm schema --output schemas/triton.schema.json

# The documentation (docs/, Sphinx + MyST) as HTML in build/docs/, warnings as errors, as
# tests/docs/test_docs_build.py builds it; the reference pages are generated from the code on every build.
docs: setup
	.venv/bin/python -m sphinx -W --keep-going -b dirhtml docs build/docs

# The release artifacts: the wheel and the source distribution of pyproject.toml's version, in dist/ (built from the
# checkout with the environment's setuptools, no download: `pip install dist/triton_sagemaker_cdk-*.whl`).
dist: setup
	rm -rf dist
	.venv/bin/python -m pip wheel --no-deps --no-build-isolation -q -w dist .
	.venv/bin/python -c "from setuptools import build_meta; build_meta.build_sdist('dist')" > /dev/null
	@ls dist

clean:
	rm -rf cdk.out assets/*.tar.gz assets/manifest.json
