"""Helpers the tests share: real brokers, ALSA file sinks, generated voices, sysroots.

Imported as ``tests.support.<module>`` (pytest puts the repository root on ``sys.path``,
see ``[tool.pytest.ini_options] pythonpath`` in ``pyproject.toml``).
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository checkout the tests run in."""
