"""The measuring code behind `tritonsm bench`: runtime comparison, load phases, capacity records,
Inference Recommender requests. One package the CLI calls; `benchmarks/` holds the results
(RESULTS.md and the raw JSON/markdown/PNG) and the standalone scripts that regenerate figures.

Heavy libraries (torch, onnxruntime, matplotlib, botocore) load inside the functions that use them.
"""
