import sys

from tritonsm.cli import main

sys.exit(main())
