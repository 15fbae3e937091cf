#!/usr/bin/env bash
# Run the test suite in .venv (set up first if missing or stale); arguments go to pytest.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# No usage reporting from Gradio or the Hugging Face hub during tests.
export GRADIO_ANALYTICS_ENABLED=False
export HF_HUB_DISABLE_TELEMETRY=1

# setup.sh stamps .venv with the hash of pyproject.toml it installed; re-run it when that changes.
stamp=.venv/.codec-lens-installed
if [[ ! -x .venv/bin/python || ! -f $stamp || $(cat "$stamp") != "$(sha256sum pyproject.toml | cut -d' ' -f1)" ]]; then
  bash scripts/setup.sh
fi

exec .venv/bin/python -m pytest -q "$@"
