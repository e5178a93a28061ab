"""A Debian guest VM for what this machine's kernel cannot do (rdma_rxe).

``testbed vm build`` makes a disk image with mmdebstrap (bookworm, minbase, the
packages of vm/packages.txt plus a kernel) and caches it by the hash of its
recipe, outside the checkout (``cache_dir()``). ``testbed vm run -- COMMAND``
boots it under qemu with the checkout shared over 9p, runs COMMAND there (the
guest's /mnt/checkout, ``testbed`` on its PATH) and returns its output and exit
code. The disk is opened with ``snapshot=on``: the image never changes, and
results come back through the shared checkout.

KVM is used only when it boots a kernel here (a probe, remembered per boot
of this machine); otherwise qemu emulates the CPU (TCG), about 10x slower.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from testbed.net import REPO_ROOT, sigterm_raises

__all__ = ["CACHE_DIR_ENV", "GuestImage", "VMError", "build_image", "cache_dir", "find_image",
           "kvm_works", "recipe", "recipe_hash", "run_in_guest"]

CACHE_DIR_ENV = "P4TB_VM_CACHE"
VM_DIR = REPO_ROOT / "vm"
PACKAGES_FILE = VM_DIR / "packages.txt"
GUEST_INIT = VM_DIR / "guest-init"
SUITE = "bookworm"
# What only the guest needs on top of vm/packages.txt: a kernel that boots
# from virtio disks, and the tools its init uses.
GUEST_PACKAGES = ("linux-image-amd64", "initramfs-tools", "kmod", "udev", "systemd-sysv")
GUEST_INIT_PATH = "/usr/local/sbin/p4tb-guest-init"
BEGIN_MARK = "P4TB-GUEST-BEGIN"
END_MARK = "P4TB-GUEST-END"
QEMU = "qemu-system-x86_64"
# Bumped when the build steps change in a way the recipe does not show.
RECIPE_VERSION = 1


class VMError(RuntimeError):
    """The guest cannot be built or run; the message says what is missing."""


def cache_dir() -> Path:
    """Where images live: $P4TB_VM_CACHE, else ~/.cache/p4testbed/vm (never the checkout)."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "p4testbed" / "vm"


def read_package_list(path: Path | None = None) -> list[str]:
    """The packages of a list file (vm/packages.txt by default; one a line, '#' comments)."""
    path = path or PACKAGES_FILE
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if any(c.isspace() for c in name):
            raise VMError(f"{path}:{n}: one package name a line, got {name!r}")
        out.append(name)
    return out


def recipe() -> dict[str, object]:
    """Everything the image is made from; its hash names the cached image."""
    return {"version": RECIPE_VERSION, "suite": SUITE, "variant": "minbase",
            "packages": sorted(set(read_package_list()) | set(GUEST_PACKAGES)),
            "init": GUEST_INIT.read_text()}


def recipe_hash() -> str:
    blob = json.dumps(recipe(), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True)
class GuestImage:
    dir: Path

    @property
    def disk(self) -> Path:
        return self.dir / "disk.raw"

    @property
    def kernel(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd.img"

    def complete(self) -> bool:
        return all(p.is_file() for p in (self.disk, self.kernel, self.initrd,
                                         self.dir / "recipe.json"))


def find_image(cache: Path | None = None) -> GuestImage | None:
    """The cached image of the current recipe, if it has been built."""
    img = GuestImage((cache or cache_dir()) / recipe_hash())
    return img if img.complete() else None


def _need_tool(name: str, package: str) -> str:
    path = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)), None)
    if path is None:
        raise VMError(f"{name} not found: install it with `apt-get install {package}` "
                      "(setup.sh does, with --vm)")
    return path


def _say(log: TextIO | None, msg: str) -> None:
    if log is not None:
        print(msg, file=log, flush=True)


def _run_step(cmd: Sequence[str], what: str, log: TextIO | None, logfile: Path) -> None:
    """Run one build step at low priority; its output goes to logfile."""
    _say(log, f"vm build: {what}")
    with logfile.open("a") as f:
        f.write(f"$ {shlex.join(cmd)}\n")
        f.flush()
        r = subprocess.run(["nice", "-n", "15", *cmd], stdout=f, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        tail = "\n".join(logfile.read_text().splitlines()[-25:])
        raise VMError(f"vm build: {what} failed (exit {r.returncode}); the last lines of "
                      f"{logfile}:\n{tail}")


def build_image(*, force: bool = False, log: TextIO | None = sys.stderr,
                cache: Path | None = None) -> GuestImage:
    """Build (or find cached) the guest image of the current recipe."""
    cache = cache or cache_dir()
    img = GuestImage(cache / recipe_hash())
    if img.complete() and not force:
        _say(log, f"vm build: cached image {img.dir}")
        return img
    mmdebstrap = _need_tool("mmdebstrap", "mmdebstrap")
    mkfs = _need_tool("mkfs.ext4", "e2fsprogs")
    if os.geteuid() != 0:
        raise VMError("vm build needs root (mmdebstrap and mkfs.ext4 -d keep file owners)")
    cache.mkdir(parents=True, exist_ok=True)
    import fcntl

    with (cache / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # one build of an image at a time
        if img.complete() and not force:
            return img
        work = Path(tempfile.mkdtemp(prefix=f"{img.dir.name}.build-", dir=cache))
        logfile = work / "build.log"
        t0 = time.monotonic()
        try:
            rootfs = work / "rootfs"
            pkgs = recipe()["packages"]
            assert isinstance(pkgs, list)
            _run_step([mmdebstrap, "--variant=minbase", f"--include={','.join(pkgs)}",
                       "--aptopt=Acquire::Retries \"3\"", SUITE, str(rootfs)],
                      f"mmdebstrap {SUITE} with {len(pkgs)} packages (a few minutes; log "
                      f"{logfile})", log, logfile)
            _install_init(rootfs)
            kernels = sorted((rootfs / "boot").glob("vmlinuz-*"))
            if not kernels:
                raise VMError(f"vm build: no kernel in {rootfs}/boot (linux-image-amd64?)")
            version = kernels[-1].name.removeprefix("vmlinuz-")
            initrd = rootfs / "boot" / f"initrd.img-{version}"
            if not initrd.is_file():
                raise VMError(f"vm build: no initrd for kernel {version} in {rootfs}/boot")
            shutil.copyfile(kernels[-1], work / "vmlinuz")
            shutil.copyfile(initrd, work / "initrd.img")
            used_mib = _du_mib(rootfs)
            size_mib = int(used_mib * 1.3) + 512        # room for logs and pip caches
            _run_step([mkfs, "-q", "-F", "-L", "p4tb-guest", "-d", str(rootfs),
                       str(work / "disk.raw"), f"{size_mib}M"],
                      f"disk image {size_mib} MiB from {used_mib} MiB of files", log, logfile)
            shutil.rmtree(rootfs)
            (work / "recipe.json").write_text(json.dumps(
                {**recipe(), "kernel": version, "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "build_seconds": round(time.monotonic() - t0, 1)}, indent=1, sort_keys=True))
            if img.dir.exists():
                shutil.rmtree(img.dir)
            work.rename(img.dir)
        except BaseException:
            # keep the log of a failed build next to the cache; remove the rest
            shutil.rmtree(work / "rootfs", ignore_errors=True)
            if logfile.exists():
                shutil.copyfile(logfile, cache / "last-failed-build.log")
            shutil.rmtree(work, ignore_errors=True)
            raise
    _say(log, f"vm build: image {img.dir} in {time.monotonic() - t0:.0f} s")
    return img


def _install_init(rootfs: Path) -> None:
    dest = rootfs / GUEST_INIT_PATH.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(GUEST_INIT, dest)
    dest.chmod(0o755)
    (rootfs / "etc" / "hostname").write_text("p4tb-guest\n")
    (rootfs / "etc" / "fstab").write_text("# the guest's init mounts what it needs\n")


def _du_mib(path: Path) -> int:
    r = subprocess.run(["du", "-sm", "-x", str(path)], capture_output=True, text=True, check=True)
    return int(r.stdout.split()[0])


# ---------------------------------------------------------------------------
# KVM or TCG


def _kvm_probe(kernel: Path, qemu: str, timeout: float = 30.0) -> bool:
    """Boot the guest kernel under KVM without a root disk: a working KVM gets it
    to the "unable to mount root" panic (then qemu exits: -no-reboot) in a few
    seconds; a broken one errors out or prints nothing."""
    cmd = [qemu, "-accel", "kvm", "-cpu", "host", "-m", "256", "-nodefaults", "-display", "none",
           "-serial", "stdio", "-no-reboot", "-kernel", str(kernel),
           "-append", "console=ttyS0 panic=-1 loglevel=4"]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return False
    out = r.stdout.decode(errors="replace")
    return "Kernel panic" in out or "VFS:" in out


def kvm_works(kernel: Path, *, cache: Path | None = None, qemu: str = QEMU) -> bool:
    """Whether KVM boots a guest kernel here; probed once per boot of this machine."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot_id = ""
    memo = (cache or cache_dir()) / "kvm-probe.json"
    try:
        known = json.loads(memo.read_text())
        if known.get("boot_id") == boot_id and known.get("kernel") == kernel.name:
            return bool(known["works"])
    except (OSError, ValueError, KeyError):
        pass
    works = _kvm_probe(kernel, qemu)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(json.dumps({"boot_id": boot_id, "kernel": kernel.name, "works": works}))
    except OSError:
        pass
    return works


# ---------------------------------------------------------------------------
# Running a command in the guest


@dataclass
class GuestResult:
    exit_code: int
    accel: str
    seconds: float
    boot_seconds: float | None      # until the command started
    timed_out: bool = False


def qemu_command(img: GuestImage, *, accel: str, checkout: Path, run_dir: Path, memory_mib: int,
                 cpus: int) -> list[str]:
    cpu = "host" if accel == "kvm" else "max"
    append = (f"console=ttyS0 root=/dev/vda rw init={GUEST_INIT_PATH} quiet loglevel=3 "
              "panic=-1 net.ifnames=0")
    return [QEMU, "-accel", accel, "-cpu", cpu, "-m", str(memory_mib), "-smp", str(cpus),
            "-nodefaults", "-display", "none", "-serial", "stdio", "-no-reboot",
            "-kernel", str(img.kernel), "-initrd", str(img.initrd), "-append", append,
            "-drive", f"file={img.disk},if=virtio,format=raw,snapshot=on",
            "-virtfs", f"local,path={checkout},mount_tag=host0,security_model=none,id=host0",
            "-virtfs", f"local,path={run_dir},mount_tag=run0,security_model=none,id=run0"]


def run_in_guest(command: Sequence[str], *, timeout: float = 1800.0, accel: str = "auto",
                 memory_mib: int = 2048, cpus: int = 2, checkout: Path = REPO_ROOT,
                 image: GuestImage | None = None, out: Callable[[str], None] | None = None,
                 boot_log: Callable[[str], None] | None = None,
                 log: TextIO | None = sys.stderr) -> GuestResult:
    """Boot the guest, run ``command`` (argv) in the shared checkout, power off.

    The command's output lines go to ``out`` as they arrive, the kernel's and
    init's to ``boot_log``. A run longer than ``timeout`` seconds is stopped
    (exit code 124); Ctrl-C stops qemu and removes the run's files."""
    if not command:
        raise VMError("vm run: no command given (testbed vm run -- COMMAND ...)")
    qemu = _need_tool(QEMU, "qemu-system-x86")
    img = image or find_image()
    if img is None:
        img = build_image(log=log)
    if accel == "auto":
        accel = "kvm" if kvm_works(img.kernel, qemu=qemu) else "tcg"
    elif accel not in ("kvm", "tcg"):
        raise VMError(f"vm run: accel must be auto, kvm or tcg, not {accel!r}")
    out = out or (lambda line: print(line, flush=True))
    run_dir = Path(tempfile.mkdtemp(prefix="p4tb-vm-run-"))
    proc: subprocess.Popen[bytes] | None = None
    t0 = time.monotonic()
    boot_s: float | None = None
    timed_out = False
    tail: list[str] = []
    on_term = contextlib.ExitStack()
    try:
        # SIGTERM (a CI job cancelled, kill) stops qemu and removes the run's
        # files as Ctrl-C does: qemu has its own session and would outlive us.
        on_term.enter_context(sigterm_raises())
        (run_dir / "command").write_text(shlex.join(command) + "\n")
        cmd = ["nice", "-n", "15", *qemu_command(img, accel=accel, checkout=checkout.resolve(),
                                                  run_dir=run_dir, memory_mib=memory_mib,
                                                  cpus=cpus)]
        _say(log, f"vm run: booting {img.dir.name} ({accel}, {cpus} CPUs, {memory_mib} MiB), "
                  f"at most {timeout:.0f} s")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        assert proc.stdout is not None
        in_command = False
        buf = b""
        deadline = t0 + timeout
        fd = proc.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready = select.select([fd], [], [], min(left, 1.0))[0]
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").rstrip("\r")
                if not in_command and line.strip() == BEGIN_MARK:
                    in_command = True
                    boot_s = time.monotonic() - t0
                elif in_command and line.startswith(END_MARK):
                    in_command = False
                elif in_command:
                    out(line)
                else:
                    tail = (tail + [line])[-40:]
                    if boot_log is not None:
                        boot_log(line)
    finally:
        if proc is not None:
            _stop(proc)
        rc_text = _read_text(run_dir / "rc")
        shutil.rmtree(run_dir, ignore_errors=True)
        on_term.close()
    seconds = time.monotonic() - t0
    if timed_out:
        _say(log, f"vm run: stopped after {timeout:.0f} s (the time limit)")
        return GuestResult(124, accel, seconds, boot_s, timed_out=True)
    if rc_text is None or not rc_text.strip().isdigit():
        msg = "\n".join(tail[-20:])
        raise VMError(f"vm run: the guest ended without running the command "
                      f"(qemu exit {proc.returncode if proc else '?'}); its last lines:\n{msg}")
    return GuestResult(int(rc_text.strip()), accel, seconds, boot_s)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End qemu (and the nice in front of it): politely, then for good."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
