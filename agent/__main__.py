"""``python -m agent`` runs the ``tts-agent`` command line."""

import sys

from agent.cli import main

sys.exit(main())
