"""An endpoint with weighted production variants (an A/B test) or a shadow variant, served locally.

Each variant runs on its own real Triton server (``endpoint``), as each SageMaker variant runs on instances of its
own. The local SageMaker Runtime routes every InvokeEndpoint to one production variant (``traffic``); a share of
the requests is copied to the shadow afterwards, by a background worker that never delays the caller
(``shadow``); the exchanges are written as SageMaker Data Capture writes them (``capture``), which
`tritonsm compare` reads.
"""
