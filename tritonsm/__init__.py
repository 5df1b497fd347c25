"""The `tritonsm` command line: validate, build, serve, invoke, bench."""
