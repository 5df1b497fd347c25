"""One module per ``tritonsm`` command: each defines its arguments (``register``, argparse only, no heavy
imports) and what runs (imported when the command runs). ``tritonsm.cli`` assembles them."""
