"""Shared fixtures: the tiny generated voice and the real voice prepared by build.sh."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO, make_tiny_voice

ROOT = REPO
REAL_MODELS = ROOT / "models"
REAL_VOICE = "en_US-joe-medium"


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A read-only-by-convention models dir holding the tiny voice; copy it before changing it."""
    models = tmp_path_factory.mktemp("tiny-models")
    make_tiny_voice.build_bundle(models)
    return models


@pytest.fixture()
def tiny_voice_dir(tiny_models_dir: Path, tmp_path: Path) -> Iterator[Path]:
    """A private copy of the tiny voice bundle (tests may modify it)."""
    models = tmp_path / "models"
    shutil.copytree(tiny_models_dir, models)
    yield models / make_tiny_voice.VOICE


@pytest.fixture(scope="session")
def real_models_dir() -> Path:
    """The models dir with the real en_US-joe-medium voice; skips when build.sh has not run."""
    if not (REAL_MODELS / REAL_VOICE / "manifest.json").is_file():
        pytest.skip("real voice not prepared: run ./build.sh")
    return REAL_MODELS


@pytest.fixture(scope="session")
def real_voice_dir(real_models_dir: Path) -> Path:
    return real_models_dir / REAL_VOICE

