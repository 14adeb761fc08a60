"""Hardware detection from fixture sysroots captured from real boards, and from this machine."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agent.hardware.detect import detect_hardware
from agent.hardware.sysroot import format_cpu_list, parse_cpu_list
from tests.support.hardware_support import sysroot


def test_cpu_lists_round_trip() -> None:
    assert parse_cpu_list("0-3,6,8-9\n") == (0, 1, 2, 3, 6, 8, 9)
    assert parse_cpu_list("") == ()
    assert format_cpu_list((9, 0, 1, 2, 3, 6, 8)) == "0-3,6,8-9"
    with pytest.raises(ValueError, match="bad CPU range"):
        parse_cpu_list("3-1")
    with pytest.raises(ValueError):
        parse_cpu_list("0-x")


def test_raspberry_pi_4() -> None:
    hw = detect_hardware(sysroot("rpi4"))
    assert hw.arch == "aarch64"
    assert hw.cpu_model == "4x Cortex-A72"
    assert hw.arm_implementer == "0x41"
    assert hw.arm_parts == ("0xd08",)
    assert hw.device_tree_model == "Raspberry Pi 4 Model B Rev 1.4"
    assert hw.device_tree_compatible == ("raspberrypi,4-model-b", "brcm,bcm2711")
    assert hw.usable_cpus == (0, 1, 2, 3)
    assert hw.cpu_budget == 4
    assert hw.physical_cores == 4
    assert hw.big_cpus == ()  # all capacities 1024: homogeneous
    assert not hw.fast_int8  # Cortex-A72 has no asimddp
    assert hw.memory_total_mb == 3884620 // 1024
    assert hw.cgroup_version == 2
    assert hw.cgroup_cpu_quota is None  # cpu.max "max 100000"
    assert hw.gpu is None


def test_raspberry_pi_3_on_a_32_bit_kernel() -> None:
    hw = detect_hardware(sysroot("rpi3"))
    assert hw.arch == "armv7l"
    assert hw.arm_parts == ("0xd03",)
    assert hw.cpu_model == "4x Cortex-A53"
    assert "neon" in hw.cpu_flags
    assert not hw.fast_int8


def test_raspberry_pi_5_has_dot_product() -> None:
    hw = detect_hardware(sysroot("rpi5"))
    assert hw.arm_parts == ("0xd0b",)
    assert hw.fast_int8
    assert hw.fast_int8_flag == "asimddp"


def test_rk3588_big_little_from_cpu_capacity() -> None:
    hw = detect_hardware(sysroot("rk3588"))
    assert hw.arm_parts == ("0xd05", "0xd0b")
    assert hw.cpu_capacity == {0: 414, 1: 414, 2: 414, 3: 414,
                               4: 1024, 5: 1024, 6: 1024, 7: 1024}
    assert hw.big_cpus == (4, 5, 6, 7)
    assert hw.big_physical_cores == 4
    assert hw.cpu_budget == 8
    assert hw.device_tree_compatible[-1] == "rockchip,rk3588"


def test_jetson_has_an_integrated_gpu() -> None:
    hw = detect_hardware(sysroot("jetson-orin-nano"))
    assert hw.gpu == "nvidia-tegra"
    assert hw.arm_parts == ("0xd42",)
    assert hw.cpu_budget == 6
    assert hw.fast_int8


def test_n100_x86_facts() -> None:
    hw = detect_hardware(sysroot("n100"))
    assert (hw.arch, hw.cpu_vendor, hw.x86_family, hw.x86_model) == (
        "x86_64", "GenuineIntel", 6, 190)
    assert hw.cpu_model == "Intel(R) N100"
    assert hw.fast_int8_flag == "avx_vnni"
    assert hw.device_tree_model is None
    assert hw.physical_cores == 4


def test_cgroup_v2_container_limited_to_two_cpus_on_a_16_cpu_host() -> None:
    hw = detect_hardware(sysroot("container-2cpu"))
    assert hw.logical_cpus == 16
    assert hw.usable_cpus == tuple(range(16))
    assert hw.cgroup_version == 2
    assert hw.cgroup_cpu_quota == 2.0
    assert hw.cpu_budget == 2
    assert hw.memory_limit_mb == 4096
    assert hw.memory_mb == 4096
    assert not hw.fast_int8  # Zen 3: AVX2 but no VNNI


def test_cgroup_v1_container_with_cpuset_and_fractional_quota() -> None:
    hw = detect_hardware(sysroot("container-v1-cpuset"))
    assert hw.cgroup_version == 1
    assert hw.usable_cpus == (2, 3)  # cpuset.cpus 2-3 (path mapped through mountinfo)
    assert hw.cgroup_cpu_quota == 1.5
    assert hw.cpu_budget == 1  # 1.5 CPUs of bandwidth keep one thread busy, not two
    assert hw.physical_cores == 2  # CPUs 2 and 3 are different cores (siblings 2,6 and 3,7)
    assert hw.memory_limit_mb is None  # v1 "unlimited" is a huge number


def test_intel_hybrid_p_cores_are_big() -> None:
    hw = detect_hardware(sysroot("intel-hybrid"))
    assert hw.big_cpus == tuple(range(16))
    assert hw.big_physical_cores == 8  # SMT siblings counted once
    assert hw.physical_cores == 12


def test_board_name_from_cpuinfo_when_the_device_tree_is_hidden(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(sysroot("rpi4"), root)
    shutil.rmtree(root / "proc" / "device-tree")
    hw = detect_hardware(root)
    assert hw.device_tree_model == "Raspberry Pi 4 Model B Rev 1.4"
    assert any("Model line" in note for note in hw.notes)


def test_process_affinity_limits_usable_cpus(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(sysroot("rk3588"), root)
    status = root / "proc" / "self" / "status"
    status.write_text(status.read_text().replace("Cpus_allowed_list:\t0-7",
                                                 "Cpus_allowed_list:\t0-5"))
    hw = detect_hardware(root)
    assert hw.usable_cpus == (0, 1, 2, 3, 4, 5)
    assert hw.big_cpus == (4, 5)


def test_empty_sysroot_degrades_with_notes(tmp_path: Path) -> None:
    hw = detect_hardware(tmp_path)
    assert hw.arch == "unknown"
    assert hw.cpu_budget == 1
    assert "proc/cpuinfo not found" in hw.notes


def test_oversized_files_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(sysroot("n100"), root)
    with (root / "proc" / "cpuinfo").open("ab") as handle:
        handle.truncate(5 << 20)
    hw = detect_hardware(root)
    assert any("larger than" in note for note in hw.notes)
    assert hw.arch == "unknown"


def test_fingerprint_tells_boards_and_limits_apart() -> None:
    prints = {detect_hardware(sysroot(b)).fingerprint()
              for b in ("rpi4", "rpi5", "rk3588", "container-2cpu", "container-v1-cpuset")}
    assert len(prints) == 5
    assert detect_hardware(sysroot("rpi4")).fingerprint() == \
        detect_hardware(sysroot("rpi4")).fingerprint()


def test_this_machine() -> None:
    """Detection on the real root agrees with what the kernel tells this process."""
    hw = detect_hardware("/")
    allowed = os.sched_getaffinity(0)
    assert set(hw.usable_cpus) <= allowed
    assert 1 <= hw.cpu_budget <= len(allowed)
    assert hw.arch != "unknown"
    assert hw.memory_total_mb and hw.memory_total_mb > 0
