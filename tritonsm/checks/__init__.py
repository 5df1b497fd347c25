"""What ``tritonsm smoke`` and ``tritonsm verify`` check: one request per model against the build's record
(``smoke_requests``), model signatures (``signatures``), the GPU runtimes on a GPU host (``gpu``)."""
