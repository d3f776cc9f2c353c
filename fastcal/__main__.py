"""`python -m fastcal` is the `fastcal` command."""

from .cli import main

raise SystemExit(main())
