"""Profile files, matching ("most specific wins"), and the effective profile with overrides."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from agent.hardware.detect import detect_hardware
from agent.hardware.effective import resolve_profile
from agent.hardware.profiles import ProfileError, default_profile_dirs, load_profile, load_profiles
from agent.hardware.tune_store import TuneOverride, write_tune
from agent.settings import effective_audio
from tests.support.hardware_support import PROFILES, settings, sysroot

# board fixture -> (profile, intra-op threads, model variant, pinned CPUs)
EXPECTED = {
    "rpi3": ("rpi3", 4, "fp32", ()),
    "rpi4": ("rpi4", 4, "fp32", ()),
    "rpi5": ("rpi5", 4, "int8", ()),
    "rpi-zero2w": ("rpi-zero2w", 3, "fp32", ()),  # one core left for audio and MQTT
    "rk3588": ("rk3588", 4, "int8", (4, 5, 6, 7)),  # the four A76 cores only
    "jetson-orin-nano": ("jetson-orin-nano", 4, "int8", ()),
    "n100": ("intel-n100", 4, "int8", ()),
    "container-2cpu": ("generic-x86_64", 2, "fp32", ()),  # cpu.max 200000/100000
    "container-v1-cpuset": ("generic-x86_64", 1, "fp32", ()),  # cpuset 2-3, quota 1.5
    "intel-hybrid": ("intel-hybrid", 8, "int8", tuple(range(16))),  # P-cores only
}


@pytest.mark.parametrize("board", sorted(EXPECTED))
def test_each_board_picks_its_profile_and_threads(board: str, tmp_path: Path) -> None:
    name, threads, variant, pinned = EXPECTED[board]
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot(board))
    assert eff.name == name
    assert eff.runtime.options.intra_op_threads == threads
    assert eff.runtime.options.inter_op_threads == 1
    assert eff.runtime.model_variant == variant
    assert eff.runtime.options.affinity_cpus == pinned
    assert eff.why[0].startswith(f"{name}: ")
    assert eff.origins["intra_op_threads"] == f"profile {name}"


def test_every_shipped_profile_is_valid() -> None:
    profiles = load_profiles([PROFILES])
    assert {"rpi3", "rpi4", "rpi5", "rpi-zero2w", "jetson-orin-nano", "rk3588", "intel-n100",
            "generic-x86_64", "generic-aarch64", "generic"} <= set(profiles.names())
    for profile in profiles.profiles.values():
        assert profile.description, profile.name


def test_most_specific_profile_wins_and_is_explained(tmp_path: Path) -> None:
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot("jetson-orin-nano"))
    matched = [c.profile.name for c in eff.candidates if c.matched]
    assert matched == ["jetson-orin-nano", "jetson-orin", "generic-aarch64", "generic"]
    assert eff.name == "jetson-orin-nano"
    assert any("preferred over jetson-orin" in line for line in eff.why)
    assert "NVIDIA Jetson Orin Nano Developer Kit" in eff.why[0]


def test_gpu_providers_need_a_gpu(tmp_path: Path) -> None:
    jetson = resolve_profile(settings(tmp_path), sysroot=sysroot("jetson-orin-nano"))
    assert jetson.runtime.options.providers == ("cuda", "cpu")
    server = resolve_profile(settings(tmp_path), sysroot=sysroot("container-2cpu"))
    assert server.runtime.options.providers == ("cpu",)
    assert any("['cuda'] skipped: no GPU detected" in line for line in server.why)


def test_zero_2_w_and_rpi3_share_a_soc_but_not_a_profile(tmp_path: Path) -> None:
    zero = detect_hardware(sysroot("rpi-zero2w"))
    pi3 = detect_hardware(sysroot("rpi3"))
    assert "brcm,bcm2837" in zero.device_tree_compatible
    assert "brcm,bcm2837" in pi3.device_tree_compatible
    eff = resolve_profile(settings(tmp_path), hardware=zero)
    assert eff.name == "rpi-zero2w"
    assert eff.audio.queue_max == 8
    assert eff.runtime.options.allow_spinning is False


def _write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "field", "detail"),
    [
        ('[runtime]\nintra_op_threads = "many"\n', "runtime.intra_op_threads", "'many'"),
        ("[runtime]\nintra_op_threads = 0\n", "runtime.intra_op_threads", "greater than"),
        ('[match]\narm_part = ["d08"]\n', "match.arm_part", "not a hex code"),
        ('[audio]\nperiod_frames = 10\n', "audio.period_frames", "greater than or equal to 64"),
        ('[runtime]\nproviders = ["npu"]\n', "runtime.providers.0", "'npu'"),
        ("[thermal]\nlimt_c = 80\n", "thermal.limt_c", "Extra inputs are not permitted"),
        ('name = "other"\n', "'name'", "the name is the file name"),
    ],
)
def test_a_broken_profile_names_the_file_and_the_field(
    tmp_path: Path, text: str, field: str, detail: str
) -> None:
    path = _write(tmp_path, "my-board", text)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert f"field {field}" in message
    assert detail in message


def test_invalid_toml_is_a_clear_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad", "[runtime\n")
    with pytest.raises(ProfileError, match=r"bad\.toml: invalid TOML"):
        load_profile(path)


def test_a_broken_local_profile_stops_resolution(tmp_path: Path) -> None:
    local = tmp_path / "profiles"
    _write(local, "rpi4", "[runtime]\ninter_op_threads = -1\n")
    with pytest.raises(ProfileError, match=r"rpi4\.toml: field runtime\.inter_op_threads"):
        resolve_profile(settings(tmp_path, synthesis={"profiles_dir": str(local)}),
                        sysroot=sysroot("rpi4"))


def test_local_profile_replaces_the_shipped_one(tmp_path: Path) -> None:
    local = tmp_path / "profiles"
    _write(local, "rpi4", '[match]\ndevice_tree_model = ["Raspberry Pi 4*"]\n'
                          "[runtime]\nintra_op_threads = 2\n[audio]\nqueue_max = 5\n")
    eff = resolve_profile(settings(tmp_path, synthesis={"profiles_dir": str(local)}),
                          sysroot=sysroot("rpi4"))
    assert eff.source == str(local / "rpi4.toml")
    assert eff.runtime.options.intra_op_threads == 2
    assert eff.audio.queue_max == 5


def test_more_specific_local_profile_wins(tmp_path: Path) -> None:
    local = tmp_path / "profiles"
    _write(local, "rpi4-8gb", '[match]\ndevice_tree_model = ["Raspberry Pi 4*"]\n'
                              "min_memory_mb = 3000\n[runtime]\nintra_op_threads = 3\n")
    eff = resolve_profile(settings(tmp_path, synthesis={"profiles_dir": str(local)}),
                          sysroot=sysroot("rpi4"))
    assert eff.name == "rpi4-8gb"  # 100 + 5 beats 100
    assert any("preferred over rpi4 (specificity 100" in line for line in eff.why)


def test_equal_specificity_tie_is_broken_by_priority_then_name(tmp_path: Path) -> None:
    local = tmp_path / "only"
    _write(local, "b-board", '[match]\narch = ["aarch64"]\n')
    _write(local, "a-board", '[match]\narch = ["aarch64"]\n')
    hw = detect_hardware(sysroot("rpi5"))
    best, why = load_profiles([local]).select(hw)
    assert best.profile.name == "a-board"
    assert "tie with b-board broken by name" in why
    _write(local, "b-board", 'priority = 5\n[match]\narch = ["aarch64"]\n')
    best, _ = load_profiles([local]).select(hw)
    assert best.profile.name == "b-board"


def test_no_matching_profile_is_an_error(tmp_path: Path) -> None:
    local = tmp_path / "only"
    _write(local, "x86-only", '[match]\narch = ["x86_64"]\n')
    with pytest.raises(ProfileError, match="no hardware profile matches"):
        resolve_profile(settings(tmp_path), sysroot=sysroot("rpi5"),
                        profiles=load_profiles([local]))


def test_profile_forced_by_settings(tmp_path: Path) -> None:
    eff = resolve_profile(settings(tmp_path, profile="rpi5"), sysroot=sysroot("rpi4"))
    assert eff.name == "rpi5"
    assert eff.forced
    assert "forced by the setting profile = 'rpi5'" in eff.why[0]
    assert "it would not match" in eff.why[0]
    with pytest.raises(ProfileError, match="no hardware profile named 'nope'; available: "):
        resolve_profile(settings(tmp_path, profile="nope"), sysroot=sysroot("rpi4"))


def test_explicit_settings_override_every_profile_field(tmp_path: Path) -> None:
    eff = resolve_profile(
        settings(
            tmp_path,
            synthesis={"intra_op_threads": 2, "inter_op_threads": 2,
                       "execution_mode": "parallel", "graph_optimization": "basic",
                       "thread_affinity": "none", "allow_spinning": False,
                       "providers": ["cpu"]},
            models={"variant": "fp32"},
            audio={"device": "hw:1", "period_frames": 256, "buffer_periods": 8, "queue_max": 3},
        ),
        sysroot=sysroot("rk3588"),
    )
    rt = eff.runtime.options
    assert (rt.intra_op_threads, rt.inter_op_threads) == (2, 2)
    assert (rt.execution_mode, rt.graph_optimization) == ("parallel", "basic")
    assert eff.runtime.thread_affinity == "none"
    assert rt.affinity_cpus == ()
    assert rt.allow_spinning is False
    assert eff.runtime.model_variant == "fp32"
    assert rt.require_provider is True
    assert eff.audio.model_dump() == {"alsa_device": "hw:1", "period_frames": 256,
                                      "buffer_periods": 8, "queue_max": 3}
    assert eff.origins["intra_op_threads"] == "settings synthesis.intra_op_threads"
    assert eff.origins["audio.queue_max"] == "settings audio.queue_max"
    assert eff.origins["thermal.limit_c"] == "profile rk3588"


def test_audio_defaults_do_not_override_the_profile(tmp_path: Path) -> None:
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot("rpi4"))
    assert eff.audio.alsa_device == "plughw:CARD=Headphones,DEV=0"
    assert eff.audio.period_frames == 512
    assert eff.thermal.limit_c == 80.0
    assert eff.thermal.zones == ["cpu-thermal"]


def test_effective_audio_is_the_profile_with_explicit_settings_winning(tmp_path: Path) -> None:
    """:func:`agent.settings.effective_audio`, the one merge of ``[audio]`` and the profile."""
    plain = settings(tmp_path)
    audio = effective_audio(plain.audio, resolve_profile(plain, sysroot=sysroot("rpi4")))
    assert (audio.device, audio.period_frames, audio.buffer_periods, audio.queue_max) == (
        "plughw:CARD=Headphones,DEV=0", 512, 4, 32)
    assert audio.model_dump(exclude={"device", "period_frames", "buffer_periods",
                                     "queue_max"}) == plain.audio.model_dump(
        exclude={"device", "period_frames", "buffer_periods", "queue_max"})
    explicit = settings(tmp_path, audio={"device": "hw:1", "buffer_periods": 8, "queue_max": 3})
    audio = effective_audio(explicit.audio, resolve_profile(explicit, sysroot=sysroot("rpi4")))
    assert (audio.device, audio.period_frames, audio.buffer_periods, audio.queue_max) == (
        "hw:1", 512, 8, 3)
    assert effective_audio(plain.audio, None) == plain.audio  # no profile: the settings


def _tune(hw_board: str, **fields: object) -> TuneOverride:
    hw = detect_hardware(sysroot(hw_board))
    data: dict[str, object] = {
        "created_at": "2026-01-01T00:00:00+00:00", "fingerprint": hw.fingerprint(),
        "hardware": "test", "profile": "x", "voice": "v", "voice_version": "1",
        "onnxruntime": "1.0", "intra_op_threads": 3, "inter_op_threads": 1,
        "thread_affinity": "none", "model_variant": "fp32", "rtf": 0.2,
    }
    data.update(fields)
    return TuneOverride.model_validate(data)


def test_tune_override_beats_the_profile_and_settings_beat_it(tmp_path: Path) -> None:
    write_tune(tmp_path / "cache" / "tune.json", _tune("rk3588"))
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot("rk3588"))
    tune_origin = f"tune {tmp_path / 'cache' / 'tune.json'}"
    assert eff.runtime.options.intra_op_threads == 3
    assert eff.runtime.model_variant == "fp32"  # the profile alone would say int8
    assert eff.runtime.thread_affinity == "none"
    assert eff.origins["intra_op_threads"] == tune_origin
    assert eff.tune is not None
    assert eff.as_dict()["tune"]["applied"] is True

    eff = resolve_profile(settings(tmp_path, synthesis={"intra_op_threads": 1}),
                          sysroot=sysroot("rk3588"))
    assert eff.runtime.options.intra_op_threads == 1
    assert eff.origins["intra_op_threads"] == "settings synthesis.intra_op_threads"
    assert eff.origins["model_variant"] == tune_origin

    eff = resolve_profile(settings(tmp_path), sysroot=sysroot("rk3588"), use_tune=False)
    assert eff.runtime.options.intra_op_threads == 4


def test_tune_from_other_hardware_is_ignored_with_a_reason(tmp_path: Path) -> None:
    write_tune(tmp_path / "cache" / "tune.json", _tune("rpi4"))
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot("rpi5"))
    assert eff.runtime.options.intra_op_threads == 4
    assert eff.tune is None
    assert eff.tune_note is not None
    assert "measured on other hardware" in eff.tune_note


def test_a_corrupt_tune_file_is_reported_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "tune.json"
    path.write_text(json.dumps({"format": 1, "intra_op_threads": "lots"}))
    eff = resolve_profile(settings(tmp_path, synthesis={"tune_file": str(path)}),
                          sysroot=sysroot("rpi5"))
    assert eff.tune is None
    assert eff.tune_note is not None
    assert eff.tune_note.startswith(f"tune override ignored: {path}: field ")
    assert eff.runtime.options.intra_op_threads == 4


def test_big_core_pinning_is_dropped_when_threads_exceed_big_cores(tmp_path: Path) -> None:
    eff = resolve_profile(settings(tmp_path, synthesis={"intra_op_threads": 6}),
                          sysroot=sysroot("rk3588"))
    assert eff.runtime.options.affinity_cpus == ()
    assert any("6 threads > 4 big CPUs, threads not pinned" in line for line in eff.why)


def test_as_dict_has_the_stable_keys_and_is_json(tmp_path: Path) -> None:
    data = resolve_profile(settings(tmp_path), sysroot=sysroot("n100")).as_dict()
    for key in ("profile", "intra_op_num_threads", "inter_op_num_threads", "model_variant",
                "hardware", "why", "audio", "thermal", "origins", "candidates"):
        assert key in data
    assert json.loads(json.dumps(data))["hardware"]["cpu_model"] == "Intel(R) N100"


def test_fixture_copy_with_other_board_name_falls_back(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(sysroot("rpi4"), root)
    (root / "proc" / "device-tree" / "model").write_bytes(b"Unknown ARM board\0")
    (root / "proc" / "device-tree" / "compatible").write_bytes(b"vendor,board\0")
    eff = resolve_profile(settings(tmp_path), sysroot=root)
    assert eff.name == "generic-aarch64"
    assert eff.runtime.options.intra_op_threads == 4


def test_shipped_profiles_come_from_the_install_share_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pip install`` puts them in ``<sys.prefix>/share/tts-agent/firmware_profiles``; nothing
    walks up from the package into a checkout."""
    share = tmp_path / "prefix" / "share" / "tts-agent" / "firmware_profiles"
    share.mkdir(parents=True)
    shutil.copy(PROFILES / "generic.toml", share)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    assert default_profile_dirs() == [share]
    assert load_profiles().names() == ["generic"]
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot("rpi4"))
    assert (eff.name, eff.source) == ("generic", str(share / "generic.toml"))
    if Path("/usr/share/tts-agent/firmware_profiles").is_dir():
        return  # a system-wide install would be found next
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "empty"))
    with pytest.raises(ProfileError, match=r"none of .*empty/share/tts-agent/firmware_profiles"):
        load_profiles()


def test_this_environment_finds_the_checkouts_profiles() -> None:
    """./build.sh links the development venv's share directory to ``firmware_profiles/``."""
    found = default_profile_dirs()
    assert found, f"no profiles in {sys.prefix}/share/tts-agent: run ./build.sh"
    assert sorted(p.name for p in found[0].glob("*.toml")) == \
        sorted(p.name for p in PROFILES.glob("*.toml"))
