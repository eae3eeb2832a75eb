"""`python -m govd` is the `govd` command."""

from govd.cli import main

raise SystemExit(main())
