"""``python -m lmcore.train ...``: the command line of :mod:`lmcore.train.cli`."""

from .cli import main

raise SystemExit(main())
