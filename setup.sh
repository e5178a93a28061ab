#!/usr/bin/env bash
# One set-up command for a fresh Debian machine (run as root, or with sudo):
# system packages for Mininet runs, then the project in .venv (editable, with
# the dev tools). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends \
    mininet iperf3 tshark python3-venv python3-dev pypy3 \
    ethtool iproute2 iputils-ping procps \
    python3-pyverbs

if [ ! -x .venv/bin/python ]; then
    /usr/bin/python3 -m venv --system-site-packages .venv
fi
.venv/bin/pip install --quiet -e '.[dev]'
echo "setup done: run tests with .venv/bin/pytest -q tests"
