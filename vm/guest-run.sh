#!/bin/sh
# Runs inside the guest (started by the image's init, vm/guest-init): sets up
# the environment, runs the command the host wrote to /mnt/run/command in the
# shared checkout, records its exit code in /mnt/run/rc, and powers off.
# The markers let the host tell the command's output from the boot messages.
export HOME=/root TERM=dumb LANG=C.UTF-8
export PYTHONPATH=/mnt/checkout PYTHONDONTWRITEBYTECODE=1 MPLBACKEND=Agg
export PYTEST_ADDOPTS="-p no:cacheprovider"
mkdir -p /run/p4tb/bin
# `testbed` on the PATH runs the shared checkout with the guest's Python.
cat > /run/p4tb/bin/testbed <<'WRAP'
#!/bin/sh
exec python3 -m testbed.cli "$@"
WRAP
chmod +x /run/p4tb/bin/testbed
export PATH="/run/p4tb/bin:$PATH"
dmesg -n 1 2>/dev/null
hostname p4tb-guest
ip link set lo up
cd /mnt/checkout || exit 1
echo "P4TB-GUEST-BEGIN"
/bin/sh /mnt/run/command < /dev/null
rc=$?
echo "P4TB-GUEST-END $rc"
echo "$rc" > /mnt/run/rc
sync
echo o > /proc/sysrq-trigger
sleep 30
