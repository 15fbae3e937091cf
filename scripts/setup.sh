#!/usr/bin/env bash
# Set up Codec Lens: .venv with the package and its test extras, plus (as root) ffprobe and
# Chromium from Debian. Idempotent; needs only python3 on a fresh Debian machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

is_root_with_apt() { [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; }

apt_updated=0
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if ((!apt_updated)); then
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  echo "setup: apt-get install $*"
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

apt_missing=()
# ffprobe serves only codec-video-prep's own CLI, the oracle of the parity tests; the app uses PyAV.
command -v ffprobe >/dev/null 2>&1 || apt_missing+=(ffmpeg)
# Headless Chromium runs the browser tests (Playwright cannot download its own browser here).
command -v chromium >/dev/null 2>&1 || apt_missing+=(chromium)
if ((${#apt_missing[@]})); then
  if is_root_with_apt; then
    apt_install "${apt_missing[@]}"
  else
    echo "setup: not root, so ${apt_missing[*]} stay missing; the oracle/browser tests will be skipped"
  fi
fi

# The codec-video-prep wheel is built for CPython 3.11 only.
python=${PYTHON:-$(command -v python3.11 || command -v python3)}
if [[ ! -x .venv/bin/python ]]; then
  if ! "$python" -m venv .venv >/dev/null 2>&1; then
    # Debian's own python3 has no ensurepip until python3-venv is installed.
    rm -rf .venv
    if is_root_with_apt; then
      apt_install python3-venv
      "$python" -m venv .venv
    else
      echo "setup: '$python -m venv' failed; install python3-venv" >&2
      exit 1
    fi
  fi
fi

# Reinstall only when the declared dependencies or the compiled kernel change, so re-runs are
# quick and need no network.
stamp=.venv/.codec-lens-installed
# setup.py and the C source too: the luma kernel is compiled at install.
want=$(cat pyproject.toml setup.py native/*.c | sha256sum | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  # ray: the batch command's Ray engine, which its tests run on a local 2-CPU Ray.
  .venv/bin/python -m pip install -qq --disable-pip-version-check -e '.[test,ray]'
  echo "$want" >"$stamp"
fi
# Byte-compile the (editable) sources once: with PYTHONDONTWRITEBYTECODE set, as on these
# machines, every CLI run would otherwise recompile them (~0.1 s), while pip compiled the
# installed dependencies at install. Stale files are simply recompiled in memory.
.venv/bin/python -m compileall -q app views backend native
echo "setup: ready ($(.venv/bin/python --version))"
