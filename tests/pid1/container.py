"""A real systemd (the host's own, Debian 12) booted as PID 1 in a throw-away container.

`systemd-nspawn -D / --volatile=yes -b` boots the host's root with a tmpfs for everything but
/usr, which is the host's, read-only. govd's staged install (`make install DESTDIR=STAGE`) goes in
the way `make install` lays it out: STAGE/usr is overlaid on /usr and STAGE/opt on /opt
(both writable, the writes discarded with the container; the host and the stage never
change), and STAGE/etc is unpacked into the container's /etc. Commands run inside
with `nsenter -t LEADER -a` (the host runs no systemd, so machinectl cannot reach it).

There is no host systemd to give the container a cgroup of its own, and nspawn with --keep-unit
stays in the cgroup it started in: each container gets its own cgroup in every named/unified
hierarchy before it starts, and those are removed (deepest first) once it has halted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
BOOT_TIMEOUT_S = 60.0
HALT_TIMEOUT_S = 20.0


def why_no_container() -> str | None:
    """The one-line reason containers cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "booting a systemd container needs root"
    if shutil.which("systemd-nspawn") is None:
        return "systemd-nspawn is missing (apt-get install systemd-container)"
    if shutil.which("nsenter") is None or shutil.which("unshare") is None:
        return "nsenter/unshare are missing (util-linux)"
    if not Path("/usr/lib/systemd/systemd").exists() and not Path("/lib/systemd/systemd").exists():
        return "the host has no systemd to boot"
    if not _hierarchies():
        return f"no writable cgroup hierarchy under {CGROUP_ROOT}"
    # An unprivileged container runtime (docker without --privileged) forbids the namespaces.
    probe = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--uts", "--ipc", "--net",
                            "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"cannot create the namespaces a container needs: {probe.stderr.strip()}"
    return None


def _hierarchies() -> list[Path]:
    """Where a container needs a cgroup of its own: the unified (v2) and name=systemd (v1)
    hierarchies of a hybrid host, or the root of a pure v2 host."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT] if os.access(CGROUP_ROOT, os.W_OK) else []
    return [CGROUP_ROOT / name for name in ("unified", "systemd")
            if os.access(CGROUP_ROOT / name, os.W_OK)]


class ContainerError(RuntimeError):
    """The container did not boot, or a command in it failed."""


class Container:
    """One booted container; `run` executes a command inside it (as root)."""

    def __init__(self, stage: Path, log_path: Path,
                 binds: tuple[tuple[Path, str], ...] = ()) -> None:
        self.name = f"govd-test-{uuid.uuid4().hex[:8]}"
        self.stage = stage
        self.log_path = log_path
        self.cgroups = [h / self.name for h in _hierarchies()]
        for cgroup in self.cgroups:
            cgroup.mkdir()
        # The shell moves itself into the container's cgroups, then becomes nspawn.
        enter = "; ".join(f"echo $$ > {c}/cgroup.procs" for c in self.cgroups)
        command = ["systemd-nspawn", "-q", "-D", "/", "--volatile=yes", "-b", "--register=no",
                   "--keep-unit", "--console=passive", "-M", self.name,
                   # Its own loopback only: nothing it starts can take a host port.
                   "--private-network",
                   # Writable, changes kept in a temporary upper layer that goes with the
                   # container: `make uninstall` may remove what install added.
                   f"--overlay=/usr:{stage / 'usr'}::/usr",
                   f"--overlay={stage / 'opt'}::/opt",
                   *(f"--bind-ro={src}:{dst}" for src, dst in binds),
                   # The booted tree has an empty /etc: without this, systemd-firstboot waits
                   # for someone to type a locale.
                   "systemd.firstboot=off"]
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in halt)
        self.proc = subprocess.Popen(
            ["sh", "-c", f'{enter}; exec "$@"', "sh", *command],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self.leader = self._wait_for_leader()
            state = self._wait_for_boot()
            if state not in ("running", "degraded"):
                raise ContainerError(f"the container booted to {state!r}:\n{self.log()}")
            self._unpack_etc()
        except BaseException:
            self.halt()
            raise

    def _wait_for_leader(self) -> int:
        """The container's PID 1 as the host sees it: nspawn's child once it runs systemd."""
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ContainerError(f"systemd-nspawn exited with {self.proc.returncode}:\n"
                                     f"{self.log()}")
            with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
                for pid in children.read_text().split():
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "systemd":
                        return int(pid)
            time.sleep(0.05)
        raise ContainerError(f"no systemd in the container after {BOOT_TIMEOUT_S} s:\n{self.log()}")

    def _wait_for_boot(self) -> str:
        """The system state once booted: `is-system-running --wait` says "offline" until
        systemd's private bus is up, so ask again until it answers something else."""
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while True:
            state = self.run("systemctl", "is-system-running", "--wait", check=False,
                             timeout=BOOT_TIMEOUT_S).stdout.strip()
            if state not in ("offline", "") or time.monotonic() > deadline:
                return state
            time.sleep(0.05)

    def _unpack_etc(self) -> None:
        """Put STAGE/etc (units, configuration) into the container's /etc, as root:root."""
        tar = Path(self.log_path).with_suffix(".etc.tar")
        with tarfile.open(tar, "w") as out:
            out.add(self.stage / "etc", arcname="etc", filter=_as_root)
        self.run("tar", "-C", "/", "-x", input_bytes=tar.read_bytes())
        tar.unlink()

    def run(self, *command: str, check: bool = True, timeout: float = 60.0,
            input_bytes: bytes | None = None) -> subprocess.CompletedProcess[str]:
        """Run `command` inside the container; stdout/stderr as text. Raises ContainerError on a
        non-zero exit when `check`."""
        done = subprocess.run(["nsenter", "-t", str(self.leader), "-a", *command],
                              input=input_bytes, capture_output=True, timeout=timeout)
        result = subprocess.CompletedProcess(done.args, done.returncode,
                                             done.stdout.decode(errors="replace"),
                                             done.stderr.decode(errors="replace"))
        if check and result.returncode != 0:
            raise ContainerError(f"{' '.join(command)} exited with {result.returncode}:\n"
                                 f"{result.stdout}{result.stderr}")
        return result

    def sh(self, script: str, check: bool = True, timeout: float = 60.0) -> str:
        """Run a shell snippet inside the container; its stdout."""
        return self.run("sh", "-c", script, check=check, timeout=timeout).stdout

    def write(self, path: str, text: str) -> None:
        """Write a root-owned 0644 file inside the container (folders made as needed)."""
        self.run("sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod 0644 "$1"',
                 "sh", path, input_bytes=text.encode())

    def log(self) -> str:
        """The container's console output so far."""
        return Path(self.log_path).read_text(errors="replace")[-4000:]

    def halt(self) -> None:
        """Power the container off (SIGTERM to nspawn halts it), then remove its cgroups."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(HALT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # Whatever survived nspawn (a PID 1 stuck shutting down) is still in our cgroups.
        for cgroup in self.cgroups:
            for procs in cgroup.rglob("cgroup.procs"):
                with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
                    for pid in procs.read_text().split():
                        os.kill(int(pid), signal.SIGKILL)
        self._log.close()
        for cgroup in self.cgroups:
            _remove_cgroup(cgroup)


def _remove_cgroup(cgroup: Path) -> None:
    """rmdir a cgroup tree deepest first, retrying while killed processes are reaped."""
    deadline = time.monotonic() + 5.0
    while cgroup.exists():
        folders = sorted((p for p in cgroup.rglob("*") if p.is_dir()),
                         key=lambda p: len(p.parts), reverse=True)
        try:
            for folder in [*folders, cgroup]:
                folder.rmdir()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info
