"""`python -m fastcal` is the `fastcal` command."""

from fastcal.cli import main

raise SystemExit(main())
