#!/usr/bin/env bash
# Installs Debian's chromium (and a small CJK font, so screenshots show the Chinese pages) for the browser tests
# when missing: Playwright cannot download browsers here. A no-op when both are there; uses sudo only when not
# root and sudo is available.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure_chromium: no apt-get; install chromium by hand (the browser tests skip without it)" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "ensure_chromium: not root and no sudo; the browser tests will skip" >&2
    exit 0
  fi
fi
echo "ensure_chromium: installing Debian's chromium" >&2
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-wqy-microhei
