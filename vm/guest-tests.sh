#!/bin/sh
# The tests that need rdma_rxe, run inside the guest VM (the host's kernel has no
# rxe):  testbed vm run -- sh vm/guest-tests.sh [PYTEST ARGS...]
# An rxe device (rxe0) on a veth end in the initial namespace serves the
# provider's loopback tests; the interop test makes its own. RDMA links are
# made through the kernel's RDMA netlink (testbed.rdma_netlink, which the rxe
# hosts use too; test_rdma_netlink_rxe.py checks it). test_rxe_run.py
# runs `testbed run roce-basics --hosts rxe --quick` and checks the DCQCN shim
# in it; test_rxe_epic.py EPIC over three rxe ranks through epic.p4 (with
# loss too) and over four under epic-tree's three switches; test_rxe_symphony.py
# Symphony's switch writing the job id rxe does not send; test_rxe_reflex.py
# ReFlex's flexible flow moved between priorities by the DSCP the shim writes
# (tc pedit and csum, which test_shaping_netlink.py checks on this kernel).
set -eu
if [ ! -e /mnt/run/command ]; then
    echo "guest-tests.sh: run it in the guest: testbed vm run -- sh vm/guest-tests.sh" >&2
    exit 2
fi
modprobe rdma_rxe
ip link add p4tb-rxl0 type veth peer name p4tb-rxl1
ip addr add 10.251.0.1/24 dev p4tb-rxl0
ip link set p4tb-rxl0 up
ip link set p4tb-rxl1 up
python3 -m testbed.rdma_netlink add rxe0 p4tb-rxl0
echo "guest: $(uname -r), $(python3 -m testbed.rdma_netlink show | head -1)"
status=0
python3 -m pytest -q -rs tests/unit/test_rxe_provider.py tests/unit/test_roce_interop_frames.py \
    tests/unit/test_rdma_netlink.py tests/integration/test_rdma_netlink_rxe.py \
    tests/integration/test_rxe_interop.py tests/integration/test_rxe_hosts.py \
    tests/integration/test_rxe_run.py tests/integration/test_rxe_epic.py \
    tests/integration/test_rxe_symphony.py tests/integration/test_rxe_reflex.py \
    tests/integration/test_shaping_netlink.py "$@" \
    || status=$?
python3 -m testbed.rdma_netlink delete rxe0
ip link del p4tb-rxl0
exit "$status"
