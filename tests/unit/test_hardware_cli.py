"""``tts-agent profile`` and ``tts-agent tune`` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from tests.support.hardware_support import REPO, sysroot


def _config(tmp_path: Path, models: Path | None = None, voice: str = "tiny-test") -> Path:
    path = tmp_path / "agent.toml"
    lines = ['device_id = "t1"', "[cache]", f'dir = "{tmp_path / "cache"}"']
    if models is not None:
        lines += ["[models]", f'dir = "{models}"', f'default_voice = "{voice}"']
    path.write_text("\n".join(lines) + "\n")
    return path


def test_profile_json_for_a_fixture_board(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["profile", "--json", "--sysroot", str(sysroot("rk3588")),
                   "--config", str(_config(tmp_path))])
    assert status == 0
    data = json.loads(capsys.readouterr().out)
    assert data["profile"] == "rk3588"
    assert data["intra_op_num_threads"] == 4
    assert data["inter_op_num_threads"] == 1
    assert data["model_variant"] == "int8"
    assert data["affinity_cpus"] == "4-7"
    assert data["hardware"]["big_cpus"] == "4-7"
    assert data["hardware"]["device_tree_model"] == "Radxa ROCK 5B"
    assert any("rockchip,rk3588" in line for line in data["why"])


def test_profile_text_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(_config(tmp_path))
    assert main(["profile", "--sysroot", str(sysroot("rpi-zero2w")), "--config", config]) == 0
    out = capsys.readouterr().out
    assert "profile        rpi-zero2w" in out
    assert "intra_op_threads 3" in out
    assert "1 reserved" in out
    assert main(["profile", "--list", "--sysroot", str(sysroot("rpi-zero2w")),
                 "--config", config]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("* rpi-zero2w")
    assert any(line.startswith("  rpi3 ") and " no " in line for line in lines)


def test_profile_check_reports_broken_files(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[match]\narch = ["aarch64"]\n')
    bad = tmp_path / "bad.toml"
    bad.write_text("[audio]\nbuffer_periods = 1\n")
    assert main(["profile", "--check", str(good)]) == 0
    assert main(["profile", "--check", str(tmp_path)]) == 2  # a file fails its check (#19-12)
    out = capsys.readouterr().out
    assert f"ok   {good}" in out
    assert f"FAIL {bad}: field audio.buffer_periods" in out
    assert main(["profile", "--check", str(REPO / "firmware_profiles")]) == 0


def test_profile_bad_sysroot_is_one_line_error(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--sysroot", str(tmp_path / "missing")]) == 2  # usage (#19-12)
    assert "sysroot is not a directory" in capsys.readouterr().err


def test_tune_measures_stores_and_the_profile_uses_it(
    tiny_voice_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(_config(tmp_path, tiny_voice_dir.parent))
    status = main(["tune", "--config", config, "--threads", "1,2", "--repeats", "2"])
    assert status == 0
    out = capsys.readouterr().out
    assert "| variant | threads |" in out
    table = [line for line in out.splitlines() if line.startswith("| fp32 |")]
    assert [row.split("|")[2].strip() for row in table] == ["1", "2"]
    chosen = [row.split("|")[2].strip() for row in table if "**chosen**" in row]
    assert len(chosen) == 1
    stored = json.loads((tmp_path / "cache" / "tune.json").read_text())
    assert stored["voice"] == "tiny-test"
    assert stored["intra_op_threads"] == int(chosen[0])
    assert [r["intra_op_threads"] for r in stored["results"]] == [1, 2]
    assert all(r["runs"] == 2 and r["rtf_median"] > 0 for r in stored["results"])

    assert main(["profile", "--json", "--config", config]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tune"]["applied"] is True
    assert data["intra_op_num_threads"] == stored["intra_op_threads"]
    assert data["origins"]["intra_op_threads"].startswith("tune ")


def test_tune_dry_run_json_stores_nothing(tiny_voice_dir: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    config = str(_config(tmp_path, tiny_voice_dir.parent))
    assert main(["tune", "--config", config, "--threads", "2", "--repeats", "1",
                 "--dry-run", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stored"] is None
    assert data["intra_op_threads"] == 2
    assert not (tmp_path / "cache" / "tune.json").exists()


def test_tune_unknown_voice_is_a_clear_error(tiny_voice_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = str(_config(tmp_path, tiny_voice_dir.parent))
    assert main(["tune", "--config", config, "--voice", "nobody", "--dry-run"]) == 2  # #19-12
    assert "no voice named 'nobody'" in capsys.readouterr().err
    assert main(["tune", "--config", config, "--variant", "int8", "--dry-run"]) == 2
    assert "has no int8 variant" in capsys.readouterr().err
