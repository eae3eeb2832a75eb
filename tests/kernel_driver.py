"""Run a govd command on a fixture tree with the kernel's rules applied to its writes:

    python -m tests.kernel_driver ROOT govd-arguments...

Plain files take any write; the kernel does not. This process loads the rules the tree's fixtures
left under ROOT (amdgpu card models, `tests.amdgpu_kernel`; xe limits, `tests.sysfs_fixtures.
load_spec`) and routes every `SysfsIO` write to a file they cover through them, so `govd run` and
`govd restore`, as processes of their own, meet EINVAL where the driver refuses, and the tree
changes as the driver's files would. Everything else is the ordinary command.
"""

from __future__ import annotations

import sys
from pathlib import Path

from govd.device.sysfs import SysfsIO
from tests.amdgpu_kernel import attach_all
from tests.sysfs_fixtures import KernelSysfs, load_spec


def apply_rules(root: Path) -> KernelSysfs:
    """Make every `SysfsIO` in this process write through the rules recorded under ``root``."""
    kernel = KernelSysfs(root)
    attach_all(root, kernel)
    load_spec(root, kernel)
    plain = SysfsIO.write_text
    # govd writes through class/drm/cardN/..., the fixtures named the files another way: the
    # same file either way once links are followed
    keys = {key.resolve(): key for key in kernel.rules}

    def write_text(io: SysfsIO, path: str | Path, value: str) -> None:
        key = keys.get(Path(path).resolve())
        if key is not None:
            kernel.write_text(key, value)
        else:
            plain(io, path, value)

    SysfsIO.write_text = write_text  # type: ignore[method-assign]
    return kernel


def main(argv: list[str]) -> int:
    """Apply ROOT's rules, then run govd with the rest of the arguments."""
    apply_rules(Path(argv[0]))
    from govd.cli import main as govd_main

    return govd_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
