"""The guest VM's host side (testbed.vm): the recipe and its cache key, clear errors
when tools are missing, and a run's protocol (output between the markers, exit
code, time limit, cleanup) against a stand-in for qemu that plays the guest.
The real guest runs in CI: .ci/run, `testbed vm run -- sh vm/guest-tests.sh`."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from testbed import vm

FAKE_QEMU = r'''#!{python}
# Plays the guest: reads the run share's command, prints boot noise, the
# markers around the command's "output", writes the exit code, exits.
import os, shlex, subprocess, sys, time
args = sys.argv[1:]
shares = {{}}
for i, x in enumerate(args):
    if x == "-virtfs":
        opts = dict(kv.split("=", 1) for kv in args[i + 1].split(",")[1:])
        shares[opts["mount_tag"]] = opts["path"]
run, checkout = shares["run0"], shares["host0"]
open(os.path.join(checkout, "qemu.argv"), "w").write(shlex.join(args))
print("[    0.000000] Linux version 6.1.0 (boot noise)", flush=True)
cmd = open(os.path.join(run, "command")).read()
print("P4TB-GUEST-BEGIN\r", flush=True)
r = subprocess.run(["/bin/sh", "-c", cmd], cwd=checkout)
print(f"P4TB-GUEST-END {{r.returncode}}", flush=True)
open(os.path.join(run, "rc"), "w").write(f"{{r.returncode}}\n")
print("reboot: Power down", flush=True)
'''


@pytest.fixture()
def fake_image(tmp_path: Path) -> vm.GuestImage:
    img = vm.GuestImage(tmp_path / "image")
    img.dir.mkdir()
    for p in (img.disk, img.kernel, img.initrd, img.dir / "recipe.json"):
        p.write_text("x")
    return img


@pytest.fixture()
def fake_qemu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    q = bindir / vm.QEMU
    q.write_text(FAKE_QEMU.format(python=sys.executable))
    q.chmod(q.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(vm, "QEMU", str(q))
    monkeypatch.setattr(vm.tempfile, "tempdir", str(tmp_path))
    return q


def _run(img: vm.GuestImage, command: list[str], checkout: Path,
         **kw: object) -> tuple[vm.GuestResult, list[str], list[str]]:
    out: list[str] = []
    boot: list[str] = []
    res = vm.run_in_guest(command, image=img, accel="tcg", checkout=checkout, out=out.append,
                          boot_log=boot.append, log=None, **kw)   # type: ignore[arg-type]
    return res, out, boot


def test_command_output_and_exit_code_come_back(fake_image, fake_qemu, tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "marker.txt").write_text("in the checkout\n")
    res, out, boot = _run(fake_image, ["sh", "-c", "cat marker.txt; echo 'a b'; exit 3"],
                          checkout)
    assert res.exit_code == 3 and not res.timed_out and res.accel == "tcg"
    assert out == ["in the checkout", "a b"]                 # no boot noise, no markers
    assert any("Linux version" in line for line in boot)
    assert res.boot_seconds is not None and res.boot_seconds <= res.seconds
    argv = (checkout / "qemu.argv").read_text()
    assert "snapshot=on" in argv and f"path={checkout}" in argv and "-accel tcg" in argv
    assert not list(tmp_path.glob("p4tb-vm-run-*/")), "the run's share was not removed"


def test_a_run_past_its_time_limit_is_stopped(fake_image, fake_qemu, tmp_path):
    res, out, _ = _run(fake_image, ["sh", "-c", "echo started; sleep 30"], tmp_path,
                       timeout=2.0)
    assert res.timed_out and res.exit_code == 124 and res.seconds < 15
    assert out == ["started"]
    assert not list(tmp_path.glob("p4tb-vm-run-*/"))


def test_sigterm_stops_the_guest_and_removes_the_run(fake_image, fake_qemu, tmp_path):
    import signal
    import threading
    import time

    from testbed.net import SoftSignal

    pid_file = tmp_path / "guest.pid"

    def term_once_started() -> None:
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=term_once_started, daemon=True).start()
    with pytest.raises(SoftSignal):
        _run(fake_image, ["sh", "-c", f"echo $$ > {pid_file}; sleep 30"], tmp_path)
    guest = int(pid_file.read_text())
    for _ in range(50):         # the guest's command went with qemu's session
        try:
            os.kill(guest, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the guest's command outlived the run")
    assert not list(tmp_path.glob("p4tb-vm-run-*/"))
    assert signal.getsignal(signal.SIGTERM) == before      # the handler was put back


def test_a_guest_that_never_runs_the_command_is_an_error(fake_image, tmp_path, monkeypatch):
    q = tmp_path / "qemu"
    q.write_text("#!/bin/sh\necho 'Kernel panic - not syncing: VFS: Unable to mount root fs'\n")
    q.chmod(0o755)
    monkeypatch.setattr(vm, "QEMU", str(q))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(vm.VMError, match="Unable to mount root"):
        vm.run_in_guest(["true"], image=fake_image, accel="tcg", log=None)


def test_missing_qemu_and_mmdebstrap_are_named(fake_image, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(vm, "_need_tool", vm._need_tool)
    with pytest.raises(vm.VMError, match=r"qemu-system-x86_64 not found.*apt-get install "
                                         r"qemu-system-x86"):
        vm.run_in_guest(["true"], image=fake_image, log=None)
    with pytest.raises(vm.VMError, match="mmdebstrap not found"):
        vm.build_image(cache=tmp_path / "cache", log=None)
    with pytest.raises(vm.VMError, match="no command"):
        vm.run_in_guest([], image=fake_image, log=None)


def test_the_cache_key_follows_the_recipe(tmp_path, monkeypatch):
    pk = tmp_path / "packages.txt"
    pk.write_text("# comment\nrdma-core\n\npython3-pyverbs  # the bindings\n")
    monkeypatch.setattr(vm, "PACKAGES_FILE", pk)
    assert vm.read_package_list(pk) == ["rdma-core", "python3-pyverbs"]
    first = vm.recipe_hash()
    assert vm.recipe_hash() == first
    assert "linux-image-amd64" in vm.recipe()["packages"]       # type: ignore[operator]
    pk.write_text("rdma-core\npython3-pyverbs\nperftest\n")
    assert vm.recipe_hash() != first
    pk.write_text("rdma-core perftest\n")
    with pytest.raises(vm.VMError, match=r"packages.txt:1: one package name a line"):
        vm.recipe_hash()


def test_images_are_cached_outside_the_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv(vm.CACHE_DIR_ENV, str(tmp_path / "c"))
    assert vm.cache_dir() == tmp_path / "c"
    assert vm.find_image() is None
    monkeypatch.delenv(vm.CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert vm.cache_dir() == tmp_path / "xdg" / "p4testbed" / "vm"
    assert vm.REPO_ROOT not in vm.cache_dir().parents


def test_kvm_is_used_only_when_the_probe_boots(tmp_path, monkeypatch, fake_image):
    calls = []

    def probe(kernel: Path, qemu: str, timeout: float = 30.0) -> bool:
        calls.append(kernel)
        return False

    monkeypatch.setattr(vm, "_kvm_probe", probe)
    monkeypatch.setattr(vm.os, "access", lambda p, m: True)
    assert vm.kvm_works(fake_image.kernel, cache=tmp_path) is False
    assert vm.kvm_works(fake_image.kernel, cache=tmp_path) is False
    assert len(calls) == 1                       # remembered for this boot of the machine
