#!/usr/bin/env bash
# A headless browser for the report's test: Debian's chromium (playwright drives it; no browser
# build can be downloaded here). Idempotent: an installed one is kept.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if ! command -v chromium >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
echo "$(chromium --version 2>/dev/null) is installed"
