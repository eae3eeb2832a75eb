"""`python -m govd` is the `govd` command."""

try:
    from govd.cli import main
except KeyboardInterrupt:  # Ctrl-C in the first milliseconds: quiet, as in `main` itself
    raise SystemExit(130) from None

raise SystemExit(main())
