#!/usr/bin/env bash
# Debian's lua5.1 and lua-cjson, for the tests of the Argo CD health checks (Argo CD runs Lua 5.1).
# Installed on first use, like the services of scripts/services.sh; needs root or sudo on a fresh machine.
set -euo pipefail
if command -v lua5.1 >/dev/null && lua5.1 -e 'require "cjson"' 2>/dev/null; then exit 0; fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -qq lua5.1 lua-cjson >/dev/null 2>&1 || { $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq lua5.1 lua-cjson >/dev/null; }
