"""Reading plain YAML into the spec's frozen dataclasses: the problems found (``errors``), the generic parser
(``parse``) and the type checks of props built in code (``type_checks``). Imports nothing else of the spec."""
