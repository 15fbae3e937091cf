#!/usr/bin/env bash
# Run the test suite in .venv (set up first if missing or stale); arguments go to pytest.
# --fast (anywhere among the arguments) runs the unit tier only: no browser, no whole-clip runs.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# No usage reporting from Gradio or the Hugging Face hub during tests.
export GRADIO_ANALYTICS_ENABLED=False
export HF_HUB_DISABLE_TELEMETRY=1

args=()
for arg in "$@"; do
  if [[ $arg == --fast ]]; then
    # The tiers are the markers registered in pyproject.toml; a later -m among the arguments wins.
    args=(-m "not browser and not slow" "${args[@]}")
  else
    args+=("$arg")
  fi
done

# setup.sh alone decides whether .venv is current (its stamp hashes what it installed); when it
# is, it returns in ~0.1 s.
bash scripts/setup.sh

exec .venv/bin/python -m pytest -q "${args[@]}"
