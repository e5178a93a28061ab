#!/usr/bin/env bash
# Provisions a testbed machine (the Vagrant VM: Ubuntu LTS, run as root) with
# everything the testbed can use: the packages of vm/packages.txt (the same
# list the guest image of `testbed vm build` is made from), BMv2 and p4c from
# p4lang's packages for this Ubuntu release, the rdma_rxe module, and the
# project itself (setup.sh). Safe to run again.
#
#   sudo vm/provision.sh [CHECKOUT]       # CHECKOUT defaults to this script's ../
set -euo pipefail
checkout="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
    echo "provision.sh: run as root (sudo)" >&2
    exit 1
fi

apt-get update
apt-get install -y --no-install-recommends ca-certificates curl gnupg

# p4lang's BMv2 and p4c packages (published per Ubuntu release).
# shellcheck source=/dev/null
. /etc/os-release
if [ "${ID:-}" = "ubuntu" ]; then
    repo="https://download.opensuse.org/repositories/home:/p4lang/xUbuntu_${VERSION_ID}"
    echo "deb ${repo}/ /" > /etc/apt/sources.list.d/home-p4lang.list
    curl -fsSL "${repo}/Release.key" | gpg --dearmor --yes -o /etc/apt/trusted.gpg.d/home-p4lang.gpg
    apt-get update
    apt-get install -y p4lang-bmv2 p4lang-p4c
    # rdma_rxe is in Ubuntu's extra modules
    apt-get install -y "linux-modules-extra-$(uname -r)"
else
    echo "provision.sh: ${ID:-this system} is not Ubuntu: no BMv2/p4c packages (soft target only)" >&2
fi

# The shared package list: one name a line, '#' comments.
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' \
    "$checkout/vm/packages.txt")
apt-get install -y --no-install-recommends "${packages[@]}"

modprobe rdma_rxe
echo rdma_rxe > /etc/modules-load.d/rdma_rxe.conf

cd "$checkout"
./setup.sh
.venv/bin/testbed doctor
