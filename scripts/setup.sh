#!/usr/bin/env bash
# Create .venv/ in the repo root and install MotorMind with everything it needs.
# Idempotent: a second run only checks. Installs Debian's libosmesa6 (headless MuJoCo rendering) and chromium (browser tests)
# when it is missing and we are root; otherwise says what to install.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] < (3, 13) else 1)'; then
  echo "setup: MotorMind needs Python 3.10-3.12 (found $("$PY" --version 2>&1)); set PYTHON=..." >&2
  exit 1
fi

if ! ldconfig -p 2>/dev/null | grep -q 'libOSMesa\.so'; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing libosmesa6 (headless rendering for MuJoCo)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libosmesa6 >/dev/null
  else
    echo "setup: libOSMesa is missing: install it (Debian/Ubuntu: sudo apt-get install libosmesa6)" >&2
    exit 1
  fi
fi

# Debian's chromium: the operator console's browser tests drive it with Playwright (no browser download)
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing chromium (the console's browser tests)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: chromium is missing: the console's browser tests will be skipped (Debian: sudo apt-get install chromium)" >&2
  fi
fi

stamp=.venv/.motormind-installed
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing MotorMind and its dependencies into .venv (about 2 GB, first time only)"
  log=.venv/install.log
  if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e ".[dev,ros]"; } >"$log" 2>&1 \
     || ! .venv/bin/python -c 'import motormind, libero.libero, mujoco, openai, rclpy, mcap_ros2, playwright.sync_api, hypothesis' >>"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "setup: the install did not complete; full log: $log" >&2
    exit 1
  fi
  touch "$stamp"
fi
echo "setup: ready ($(.venv/bin/python -c 'import mujoco, numpy; print(f"mujoco {mujoco.__version__}, numpy {numpy.__version__}")'))"
