#!/usr/bin/env bash
# The headless browser that tests/loadgen/report/test_html_browser.py opens report.html in,
# for CI (call it with the project's virtual environment active):
#   chromium, chromium-driver  Debian   the browser and its WebDriver
#   selenium                   PyPI     drives it (pinned; the Debian driver is used,
#                                       Selenium Manager never downloads one)
# In CI (CI set) the browser test fails rather than skips when these are missing.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      chromium chromium-driver >/dev/null
  else
    echo "browser-tools: no root or no apt-get: install chromium and chromium-driver" >&2
    exit 1
  fi
fi

python -m pip install -q 'selenium==4.51.0'

chromium --version
chromedriver --version
python -c 'import importlib.metadata as m; print("selenium", m.version("selenium"))'
