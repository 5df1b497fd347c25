"""Development tooling the benchmark scripts of benchmarks/ and the tests share: tiny checkpoints with trained
tokenizers and processors for every architecture transformers maps, the coverage runs that build and serve them,
the build-cost measurement. Not part of the installed package: ``tritonsm`` never imports it."""
