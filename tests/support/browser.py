"""Headless Chromium through its WebDriver: does a report really render in a browser?

Counting `data:image/png` strings proves nothing about whether an image decodes; a
browser does. Chromium and chromium-driver come from Debian (.ci/browser-tools.sh),
selenium from PyPI; Selenium Manager is never asked to download anything.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")

# Every <img>: did it finish loading and decode to a real bitmap?
IMAGES_JS = """
return Array.from(document.images).map(function (img) {
  return {alt: img.alt, complete: img.complete, width: img.naturalWidth,
          height: img.naturalHeight};
});
"""


def _tools() -> tuple[str | None, str | None, bool]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401

        has_selenium = True
    except ImportError:
        has_selenium = False
    return browser, driver, has_selenium


def require_browser() -> tuple[str, str]:
    """Paths of chromium and chromedriver; skip without them, except in CI (fail)."""
    browser, driver, has_selenium = _tools()
    if browser and driver and has_selenium:
        return browser, driver
    missing = [name for name, ok in (("chromium", browser), ("chromedriver", driver),
                                     ("selenium", has_selenium)) if not ok]
    message = f"{', '.join(missing)} missing (run .ci/browser-tools.sh)"
    if os.environ.get("CI"):
        pytest.fail(message + ": CI must run the browser test")
    pytest.skip(message)


@contextmanager
def headless_chromium() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = require_browser()
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    try:
        yield session
    finally:
        session.quit()
        shutil.rmtree(profile, ignore_errors=True)


def images_of(session: Any, url: str) -> list[dict[str, Any]]:
    session.get(url)
    return session.execute_script(IMAGES_JS)
