"""The `govd` sub-commands, one module each: it registers its parser, calls the layers below
(devices, configuration, daemon, evaluator, simulator) and turns their typed errors into one
line. Only `govd.cli` imports these; no layer below imports them."""
