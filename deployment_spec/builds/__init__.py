"""What a build produced and whether it still matches: the build manifest (``manifest``), the signed build
statement that binds its tarballs, models and signatures (``statement``, ``statement_checks``, verified with the
standard library's ``ecdsa_verify``), what each model is built from (``model_sources``, ``recipe_sources``), and
the one rule synth and `tritonsm serve` share: does a build serve what the spec names now (``spec_match``).
Imports ``rules``, ``sections``, ``facts`` and ``parsing``; never the loader or ``cost``."""
