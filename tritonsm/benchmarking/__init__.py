"""The measuring code behind `tritonsm bench`: runtime comparison, load phases, asynchronous drain, capacity
records, Inference Recommender requests and imports, cost per million. `tritonsm.commands.bench` defines the
arguments and `runners` runs each subcommand; `benchmarks/` (development, not installed) holds the results and the
standalone scripts that regenerate figures, with their tooling in `benchmarks/tooling/`.

Heavy libraries (torch, onnxruntime, matplotlib, botocore) load inside the functions that use them.
"""
