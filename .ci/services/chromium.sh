#!/usr/bin/env bash
# Install Debian's chromium for the HTML report test (a real headless browser loads the page,
# checks the console and takes a screenshot: tests/report/test_html_browser.py).
#
# Idempotent: when chromium already answers --version, it only checks. Returns non-zero
# (with the reason) when the browser cannot be installed or does not start.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
fi
# The launcher script prints a harmless shell warning on some hosts; only the version matters.
version=$(chromium --version 2>/dev/null | head -n 1)
case "$version" in
    Chromium*) echo "chromium.sh: $version" ;;
    *) echo "chromium.sh: chromium --version gave '$version'" >&2; exit 1 ;;
esac
