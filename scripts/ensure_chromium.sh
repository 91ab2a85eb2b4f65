#!/usr/bin/env bash
# Installs Debian's chromium for the audit report's browser test, if it is missing and we may (root + apt).
# In CI (CI=true) a missing browser is an error: the browser test must run there, not skip.
set -u
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
command -v chromium >/dev/null 2>&1 && exit 0
if [ "${CI:-}" = true ]; then
  echo "ensure_chromium: chromium is missing and could not be installed; CI needs it for the browser test" >&2
  exit 1
fi
echo "ensure_chromium: chromium not found and cannot be installed here; the browser test will be skipped" >&2
exit 0
