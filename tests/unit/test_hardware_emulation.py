"""Board facts of a Raspberry Pi OS trixie root, and of a root run under qemu-user emulation.

The ``*-trixie`` fixtures are laid out as the board has them: ``proc/device-tree`` is the
kernel's absolute link to ``/sys/firmware/devicetree/base``, and the Raspberry Pi arm64 kernels
since late 2023 print ``Revision``/``Serial``/``Model`` after the CPUs but no ``Hardware`` line
(Debian's own arm64 kernel prints none of the four). Under qemu-user the host's ``/proc`` shows
through: :mod:`agent.hardware.emulation`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.hardware.detect import detect_hardware
from agent.hardware.effective import resolve_profile
from agent.hardware.emulation import arch_family, reconcile
from tests.support.hardware_support import settings, sysroot

# trixie fixture -> (profile, board, SoC compatible, ARM part, model variant)
TRIXIE = {
    "rpi4-trixie": ("rpi4", "Raspberry Pi 4 Model B Rev 1.5", "brcm,bcm2711", "0xd08", "fp32"),
    "rpi5-trixie": ("rpi5", "Raspberry Pi 5 Model B Rev 1.0", "brcm,bcm2712", "0xd0b", "int8"),
}


def _copy(board: str, tmp_path: Path) -> Path:
    root = tmp_path / board
    shutil.copytree(sysroot(board), root, symlinks=True)
    return root


@pytest.mark.parametrize("board", sorted(TRIXIE))
def test_a_trixie_pi_picks_its_profile_from_the_device_tree(board: str, tmp_path: Path) -> None:
    name, model, soc, part, variant = TRIXIE[board]
    assert (sysroot(board) / "proc" / "device-tree").is_symlink()
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot(board))
    hw = eff.hardware
    assert (eff.name, hw.arch, hw.device_tree_model) == (name, "aarch64", model)
    assert hw.device_tree_compatible[-1] == soc
    assert hw.arm_parts == (part,)
    assert eff.runtime.model_variant == variant
    assert hw.emulated_on is None
    assert not any("Model line" in note for note in hw.notes)  # read from the device tree


@pytest.mark.parametrize("board", sorted(TRIXIE))
def test_debian_kernel_cpuinfo_without_board_lines(board: str, tmp_path: Path) -> None:
    """Debian's arm64 kernel prints no Revision/Serial/Model lines: the device tree suffices."""
    root = _copy(board, tmp_path)
    cpuinfo = root / "proc" / "cpuinfo"
    text = cpuinfo.read_text()
    cpuinfo.write_text(text[: text.index("Revision")])
    (root / "proc" / "device-tree").unlink()  # only /sys/firmware/devicetree/base
    eff = resolve_profile(settings(tmp_path), sysroot=root)
    assert (eff.name, eff.hardware.device_tree_model) == (TRIXIE[board][0], TRIXIE[board][1])


def test_an_absolute_link_in_a_sysroot_stays_inside_it(tmp_path: Path) -> None:
    """A captured tree's ``/...`` link targets mean the board's files, not the reader's."""
    host_base = tmp_path / "host" / "devicetree" / "base"  # what the reading machine has there
    host_base.mkdir(parents=True)
    (host_base / "model").write_bytes(b"Raspberry Pi 4 Model B Rev 1.1\0")
    root = _copy("rpi5-trixie", tmp_path)
    board_base = root / str(host_base).lstrip("/")  # the same absolute path, in the board's tree
    shutil.copytree(root / "sys" / "firmware" / "devicetree" / "base", board_base)
    (root / "proc" / "device-tree").unlink()
    (root / "proc" / "device-tree").symlink_to(host_base)
    hw = detect_hardware(root)
    assert hw.device_tree_model == "Raspberry Pi 5 Model B Rev 1.0"
    (root / "proc" / "device-tree").unlink()
    up_too_far = "../" * 8 + "sys/firmware/devicetree/base"
    (root / "proc" / "device-tree").symlink_to(up_too_far)
    assert detect_hardware(root).device_tree_model == "Raspberry Pi 5 Model B Rev 1.0"


def test_a_link_loop_in_a_sysroot_is_a_note_not_a_hang(tmp_path: Path) -> None:
    root = _copy("rpi4-trixie", tmp_path)
    shutil.rmtree(root / "sys" / "firmware")
    (root / "proc" / "device-tree").unlink()
    (root / "proc" / "device-tree").symlink_to("/proc/device-tree")
    hw = detect_hardware(root)
    assert hw.device_tree_model == "Raspberry Pi 4 Model B Rev 1.5"  # the cpuinfo Model line
    assert "proc/device-tree/model: too many symbolic links" in hw.notes


def test_the_host_cpu_seen_through_emulation_is_not_the_board(tmp_path: Path) -> None:
    """An aarch64 process reading an x86_64 host's /proc (qemu 7.2) gets no x86 profile."""
    native = resolve_profile(settings(tmp_path), sysroot=sysroot("n100"))
    assert native.name == "intel-n100"
    hw = detect_hardware(sysroot("n100"), machine="aarch64")
    assert (hw.arch, hw.emulated_on, hw.cpu_model, hw.cpu_vendor) == (
        "aarch64", "x86_64", None, None)
    assert not hw.cpu_flags and not hw.fast_int8
    assert hw.usable_cpus == native.hardware.usable_cpus  # the host's CPUs do run the code
    assert any("--sysroot" in note and "emulated" in note for note in hw.notes)
    eff = resolve_profile(settings(tmp_path), hardware=hw)
    assert eff.name == "generic-aarch64"
    assert eff.as_dict()["hardware"]["emulated_on"] == "x86_64"


def test_matching_cpu_families_are_left_alone() -> None:
    same = detect_hardware(sysroot("rpi5-trixie"), machine="aarch64")
    assert (same.emulated_on, same.arm_parts) == (None, ("0xd0b",))
    assert detect_hardware(sysroot("rpi3"), machine="aarch64").arch == "armv7l"  # 32-bit kernel
    facts = {"arch": "x86_64", "cpu_model": "AMD EPYC"}
    assert reconcile(facts, "riscv64", []) is facts  # an unknown family: nothing to compare
    assert (arch_family("AARCH64"), arch_family("i686"), arch_family("s390x")) == (
        "arm", "x86", None)
