# govd: set-up, tests, benchmarks and the demo.
# Every target installs what it needs first (see `setup`), so each works from a fresh clone.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.govd-installed

.PHONY: setup container-tools kernels test lint bench demo clean install install-system uninstall

setup: $(STAMP) container-tools

# tests/pid1 boots a real systemd in a container with systemd-nspawn (systemd-container). It
# can only run as root, so only root gets it installed; others skip that suite with its reason.
container-tools:
	@if ! command -v systemd-nspawn >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	    command -v apt-get >/dev/null 2>&1; then \
	  echo "govd setup: installing systemd-container with apt-get"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd-container >/dev/null || exit 1; \
	fi

# System packages: systemd-python has no wheel and compiles against libsystemd, so it needs
# libsystemd-dev, pkg-config, a C compiler and the Python headers; venv needs python3-venv on
# Debian; the udev tests need umockdev (umockdev-run, libumockdev-preload.so). As root we
# install what is missing with apt; otherwise we say exactly what to install.
$(STAMP): pyproject.toml
	@missing=""; \
	pkg-config --version >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	pkg-config --exists libsystemd 2>/dev/null || missing="$$missing libsystemd-dev"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing gcc"; \
	$(PYTHON) -c 'import sysconfig,os,sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"],"Python.h")))' \
	  || missing="$$missing python3-dev"; \
	$(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	command -v umockdev-run >/dev/null 2>&1 || missing="$$missing umockdev libumockdev0"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "govd setup: installing$$missing with apt-get"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "govd setup: missing system packages:$$missing"; \
	    echo "  install them with: sudo apt-get install$$missing"; exit 1; \
	  fi; \
	fi
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	$(MAKE) -s --no-print-directory kernels
	touch $(STAMP)

# The per-tick kernels compiled ahead of time (govd/kernels/build.py), so that `govd run`
# imports neither numba nor llvmlite (~40 MB, ~0.3 s). The tests then run what the installed
# service runs; tests/test_kernels_aot.py compares it with numba's JIT and rebuilds it when the
# kernel sources changed. A failed build fails nothing: govd falls back to numba's JIT.
kernels:
	-@$(PY) -m govd.kernels.build || echo "govd: kernels not compiled ahead of time; govd uses numba's JIT"

# pytest exits 5 when it collected nothing: for us that is a failure, never a pass. The setup
# installed umockdev, so the udev tests must run here, not skip. One pytest-xdist worker per
# CPU, and one more for the containers; tests/conftest.py says what that asks of a test. (Not
# --dist loadgroup: with pytest 9.2 xdist 3.8 no longer groups by xdist_group, silently.)
# Unless TMPDIR is set, the tests' scratch (pytest's tmp_path, every folder made with
# tempfile) is a fresh folder in /dev/shm, a tmpfs, open to all as /tmp is (1777), removed
# afterwards even when interrupted: the simulated GPUs rename their sysfs files every tick,
# which on an ext4 /tmp costs system CPU and disk writes. Not where /dev/shm is noexec (the
# staged install runs from there) or has under 2 GiB free (the suite's peak: 0.43 GiB).
# Python's bytecode is cached even where PYTHONDONTWRITEBYTECODE is set (a pytest run starts
# ~400 Pythons, each compiling govd afresh without a cache, and each worker rewrites every
# test module's asserts again): in the scratch folder (PYTHONPYCACHEPREFIX, root's and 0755,
# made before the scratch is opened to all: no other user can plant bytecode there, and the
# tests' Pythons running as uid 65534 read it rather than compile in memory), or in the
# checkout's ignored __pycache__ folders when TMPDIR is set. That cache starts empty, and the
# workers start together: each would rewrite and compile every test module and the govd
# modules they import (~19 s of CPU a worker, ~6 s with the cache). So two collections, of
# every other test file each, fill it first, side by side on CPUs that would otherwise wait
# (their output is the workers' to show: a module that fails to import fails there).
# OPENBLAS_NUM_THREADS=1: each Python that imports NumPy would start a BLAS thread per CPU,
# which govd's vectors of 4-16 numbers never use and which spin in the workers under the
# suite's load (bench/README.md, "The test suite's time").
test: setup
	$(PY) -m ruff check govd tests bench
	@scratch=; \
	if [ -z "$${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && $(PY) -c 'import os, sys; \
	  s = os.statvfs("/dev/shm"); sys.exit(s.f_flag & os.ST_NOEXEC or s.f_bavail * s.f_frsize < 2 << 30)'; then \
	  scratch=$$(mktemp -d /dev/shm/govd-test.XXXXXX) && mkdir -m 755 "$$scratch/pycache" && \
	  chmod 1777 "$$scratch" && export TMPDIR="$$scratch" PYTHONPYCACHEPREFIX="$$scratch/pycache"; \
	  trap 'rm -rf "$$scratch"' EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; \
	fi; \
	unset PYTHONDONTWRITEBYTECODE; export OPENBLAS_NUM_THREADS=1; \
	tests=$$(find tests -name 'test_*.py' | sort); for half in 0 1; do \
	  PYTEST_ADDOPTS= $(PY) -m pytest --collect-only -q -p no:cacheprovider \
	    $$(printf '%s\n' $$tests | awk -v half=$$half 'NR % 2 == half') >/dev/null 2>&1 & \
	done; wait; \
	GOVD_REQUIRE_UMOCKDEV=1 $(PY) -m pytest -n auto; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

lint: setup
	$(PY) -m ruff check govd tests bench
	$(PY) -m mypy govd/model govd/kernels govd/policy govd/governor.py

bench: setup
	$(PY) bench/bench_model.py

# The README's first command: the real daemon governs the built-in simulated GPU (a separate
# process keeping a devfreq tree in a temporary folder, in lockstep with the daemon) for 600
# simulated seconds at up to 10x speed, printing a status line per wall second and, at the end,
# the comparison with the twins under the kernel's performance and simple_ondemand governors.
demo: setup
	$(PY) -m govd run --sim --speed 10 --duration-s 600

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis govd/model/_aot_*
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# --- installing the service -------------------------------------------------------------
# govd lives in its own virtual environment (Debian's system Python refuses pip installs,
# PEP 668), with /usr/local/bin/govd pointing into it: the path the units run. DESTDIR
# stages everything under a folder (packaging, tests) and then touches no system state.
DESTDIR      ?=
APPDIR       ?= /opt/govd
BINDIR       ?= /usr/local/bin
DOCDIR       ?= /usr/local/share/doc/govd
UNITDIR      ?= /etc/systemd/system
SYSUSERSDIR  ?= /usr/lib/sysusers.d
TMPFILESDIR  ?= /usr/lib/tmpfiles.d
CONFDIR      ?= /etc/govd
INSTALL_ENV  := env -u PYTHONPYCACHEPREFIX

install: setup
	@# The unit's ProtectHome=yes hides /home, /root and /run/user from govd: a venv whose base
	@# interpreter lives there (pyenv, a user's own Python) could not even start (203/EXEC).
	@base=$$($(PYTHON) -c 'import sys; print(sys.base_prefix)'); case "$$base/" in \
	  /home/*|/root/*|/run/user/*) echo "govd install: $(PYTHON) lives in $$base, which the service cannot see (ProtectHome=yes); use PYTHON=/usr/bin/python3" >&2; exit 1;; esac
	@# pip compiles the installed sources' bytecode beside them, not under a PYTHONPYCACHEPREFIX
	@# (make test sets one): the service cannot write /opt, and would compile govd at each start.
	test -x $(DESTDIR)$(APPDIR)/bin/python || $(INSTALL_ENV) $(PYTHON) -m venv $(DESTDIR)$(APPDIR)
	$(INSTALL_ENV) $(DESTDIR)$(APPDIR)/bin/python -m pip install -q --upgrade pip
	$(INSTALL_ENV) $(DESTDIR)$(APPDIR)/bin/python -m pip install -q '.[metrics]'
	@# in the installed package, from its own sources (a failure only costs numba's JIT), or
	@# taken from this checkout's `make setup` when built from the same sources (same digest:
	@# sources and NumPy version); -I: a PYTHONPATH naming a checkout would build its kernels
	-@cd / && NUMBA_CACHE_DIR=$$(mktemp -d) $(INSTALL_ENV) sh -c '$(DESTDIR)$(APPDIR)/bin/python -I -m govd.kernels.build --reuse $(CURDIR)/govd/model; \
	  rc=$$?; rm -rf "$$NUMBA_CACHE_DIR"; exit $$rc' || \
	  echo "govd install: kernels not compiled ahead of time; govd will use numba's JIT (it says so at start)"
	@# pip writes the venv's own path into its scripts' #! lines; staged, that is the DESTDIR
	@# path, which does not exist once the tree is in place: point them at $(APPDIR).
	@[ -z "$(DESTDIR)" ] || grep -rlI -- '$(DESTDIR)$(APPDIR)' $(DESTDIR)$(APPDIR)/bin \
	  $(DESTDIR)$(APPDIR)/pyvenv.cfg | xargs -r sed -i 's|$(DESTDIR)$(APPDIR)|$(APPDIR)|g'
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(UNITDIR) \
	  $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(CONFDIR)
	ln -sfn $(APPDIR)/bin/govd $(DESTDIR)$(BINDIR)/govd
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -m 0644 systemd/govd.service systemd/govd.socket $(DESTDIR)$(UNITDIR)/
	install -m 0644 systemd/govd.sysusers $(DESTDIR)$(SYSUSERSDIR)/govd.conf
	install -m 0644 systemd/govd.tmpfiles $(DESTDIR)$(TMPFILESDIR)/govd.conf
	@# every example drop-in the README names (metrics, MangoHud home folder, fdinfo, sysctl)
	install -m 0644 systemd/*.example $(DESTDIR)$(DOCDIR)/
	@# never overwrite a configuration the administrator has edited
	test -e $(DESTDIR)$(CONFDIR)/govd.yaml || install -m 0644 config/govd.yaml $(DESTDIR)$(CONFDIR)/govd.yaml
	@[ -n "$(DESTDIR)" ] || $(MAKE) -s --no-print-directory install-system

# What install does to the running system once the files are in place (not when staging with
# DESTDIR): the group, the MangoHud folder (govd.tmpfiles), then systemd rereads its units.
# tests/pid1 runs this target inside a container where a staged tree has been put in place.
install-system:
	systemd-sysusers govd.conf 2>/dev/null || getent group govd >/dev/null || groupadd --system govd
	systemd-tmpfiles --create govd.conf 2>/dev/null || install -d -m 3770 -g govd /var/lib/govd/mangohud
	if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
	@echo "installed; start with: systemctl enable --now govd.socket govd.service"

uninstall:
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
	  systemctl disable --now govd.service govd.socket 2>/dev/null || true; \
	fi
	@# the service's ExecStopPost restores the clocks; this covers a govd run by hand
	-@[ -n "$(DESTDIR)" ] || [ ! -x $(BINDIR)/govd ] || $(BINDIR)/govd restore --config $(CONFDIR)/govd.yaml
	rm -f $(DESTDIR)$(UNITDIR)/govd.service $(DESTDIR)$(UNITDIR)/govd.socket \
	  $(DESTDIR)$(SYSUSERSDIR)/govd.conf $(DESTDIR)$(TMPFILESDIR)/govd.conf $(DESTDIR)$(BINDIR)/govd
	rm -rf $(DESTDIR)$(APPDIR) $(DESTDIR)$(DOCDIR)
	@# drop-ins copied from the examples as they are go; any other is the administrator's
	@if [ -d $(DESTDIR)$(UNITDIR)/govd.service.d ]; then \
	  for f in $(DESTDIR)$(UNITDIR)/govd.service.d/*.conf; do \
	    [ -e "$$f" ] || continue; \
	    for e in systemd/*.example; do cmp -s "$$e" "$$f" && rm -f "$$f" && break; done; \
	  done; \
	  rmdir $(DESTDIR)$(UNITDIR)/govd.service.d 2>/dev/null || \
	    echo "kept $(DESTDIR)$(UNITDIR)/govd.service.d (drop-ins not from govd:" \
	      "$$(ls $(DESTDIR)$(UNITDIR)/govd.service.d | tr '\n' ' ' | sed 's/ $$//'))"; \
	fi
	@# what install-system made: MangoHud's folder (logs kept there are transient, cleaned
	@# after 7 days anyway) and the group
	@if [ -z "$(DESTDIR)" ]; then \
	  rm -rf /var/lib/govd/mangohud; rmdir /var/lib/govd 2>/dev/null || true; \
	  if getent group govd >/dev/null; then groupdel govd || echo "govd uninstall: group govd kept (groupdel failed)"; fi; \
	fi
	@# the configuration goes only if it is still the shipped one
	@if cmp -s config/govd.yaml $(DESTDIR)$(CONFDIR)/govd.yaml; then \
	  rm -f $(DESTDIR)$(CONFDIR)/govd.yaml; rmdir $(DESTDIR)$(CONFDIR) 2>/dev/null || true; \
	elif [ -e $(DESTDIR)$(CONFDIR)/govd.yaml ]; then \
	  echo "kept $(DESTDIR)$(CONFDIR)/govd.yaml (edited)"; fi
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
