#!/usr/bin/env bash
# Installs Debian's chromium for the audit report's browser test, if it is missing and we may (root + apt).
set -u
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "ensure_chromium: could not install chromium; the browser test will be skipped" >&2
else
  echo "ensure_chromium: chromium not found and cannot apt-get install it; the browser test will be skipped" >&2
fi
exit 0
