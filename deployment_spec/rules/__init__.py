"""Rules across the spec's sections and what they derive: the cross-section checks, SageMaker's rules for an
endpoint, the builds variants need, an inference-components endpoint's names, an endpoint's container
environment. Imports ``sections``, ``facts`` and ``parsing``, never ``cost`` or the loader."""
