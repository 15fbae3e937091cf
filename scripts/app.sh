#!/usr/bin/env bash
# Launch Codec Lens on the bundled sample clip (or pass a video and flags through).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh  # makes or refreshes .venv; ~0.1 s when it is current
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_DISABLE_TELEMETRY=1
exec .venv/bin/codec-lens app "$@"
