"""The spec's sections, one module each, as the YAML file has them: ``models:`` (with its tensors, tasks, DALI
pipelines, recipes and Python requirements), ``endpoints:`` (scaling, schedules, inference components,
asynchronous inference, variants, capacity reservations), ``environments:``, ``pipeline:`` and ``signing:``.
Each parses its own part and checks what it can see alone; rules across sections live in ``rules``."""
