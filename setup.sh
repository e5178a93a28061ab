#!/usr/bin/env bash
# One set-up command for a fresh Debian machine (run as root, or with sudo):
# system packages for Mininet runs (and Chromium, in which a test loads the
# report page), then the project in .venv (editable, with the dev tools and
# the P4Runtime, docs and Dask cluster extras), PyPy's environment for the
# virtual-time engine, and p4runtime-shell in an environment of its own.
# Safe to run again.
#
#   ./setup.sh          the project and what Mininet runs need
#   ./setup.sh --vm     also what `testbed vm build/run` needs (mmdebstrap, qemu)
set -euo pipefail
cd "$(dirname "$0")"

vm=0
for arg in "$@"; do
    case "$arg" in
        --vm) vm=1 ;;
        *) echo "setup.sh: unknown option $arg (known: --vm)" >&2; exit 2 ;;
    esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends \
    mininet iperf3 tshark python3-venv python3-dev pypy3 \
    ethtool iproute2 iputils-ping procps \
    python3-pyverbs python3-pyroute2 chromium
if [ "$vm" -eq 1 ]; then
    # the guest VM: image builder, emulator, file system tools, script checks
    $SUDO apt-get install -y --no-install-recommends \
        mmdebstrap qemu-system-x86 e2fsprogs shellcheck
fi

if [ ! -x .venv/bin/python ]; then
    /usr/bin/python3 -m venv --system-site-packages .venv
fi
.venv/bin/pip install --quiet -e '.[dev,p4runtime,docs,cluster]'

# The virtual-time engine runs under PyPy where it finds .venv-pypy
# (testbed/sim/pypy.py): Debian's PyPy with numpy, the one package its
# simulated path needs (2.0.2: the last release with wheels for PyPy 3.9).
if [ ! -x .venv-pypy/bin/python ]; then
    pypy3 -m venv .venv-pypy
fi
.venv-pypy/bin/pip install --quiet 'numpy==2.0.2'

# p4runtime-shell pins old protobuf/ipython/jedi versions: it gets its own
# environment so it can never break the project's .venv. The tests use it to
# check that the shell drives the soft switch's P4Runtime server.
if [ ! -x .venv-p4runtime-shell/bin/python ]; then
    /usr/bin/python3 -m venv .venv-p4runtime-shell
fi
.venv-p4runtime-shell/bin/pip install --quiet 'p4runtime-shell==0.0.6' 'protobuf==3.20.3' \
    'googleapis-common-protos<1.74'
echo "setup done: run tests with .venv/bin/pytest -q tests"
