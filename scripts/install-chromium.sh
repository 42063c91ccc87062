#!/usr/bin/env bash
# Headless Chromium for the report-rendering test (Debian's package). Without it, that one
# test skips with a message; CI installs it so that it always runs there.
set -euo pipefail
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
else
  echo "scripts/install-chromium.sh: install Debian's 'chromium' package (needs root)" >&2
  exit 1
fi
