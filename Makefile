# The two commands of the README: `make` (set up, build the default models,
# synthesize every environment with cdk-nag) and `make test`.
.PHONY: all setup build synth test clean

all: synth

setup:
	@scripts/bootstrap.sh

build: setup
	.venv/bin/tritonsm build

synth: build
	.venv/bin/cdk synth --quiet

test: setup
	.venv/bin/python -m pytest

clean:
	rm -rf cdk.out assets/*.tar.gz assets/manifest.json
