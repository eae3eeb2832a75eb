"""Custody of devices: how any govd process takes a GPU, keeps what it found, and gives it back.

`lock` (one holder per device), `state_file` (what was found, on disk before the first write),
`signals` (Ctrl-C and SIGTERM as flags, so every way out goes through the restore) and
`custody` (the three together, used by the daemon, `govd measure` and `govd restore` alike).
"""
