"""Headless Chromium for the web pages' browser tests (the console's, the chat's): Debian's
``chromium`` and ``chromium-driver`` through Selenium.

With ``SAGENTS_CHROMEDRIVER_LOG=FILE`` chromedriver appends its verbose log to FILE: each WebDriver
command and the DevTools events and messages behind it (what a page load waited for)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_S = 60  # seconds any one thing may take to show in the browser


@contextmanager
def chromium(width: int = 1200, height: int = 800) -> Iterator[Any]:
    """A headless Chromium (a Selenium ``WebDriver``), quit at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(flag)
    log = os.environ.get("SAGENTS_CHROMEDRIVER_LOG")  # chromedriver's DevTools traffic, appended
    service = Service(
        CHROMEDRIVER or "",
        service_args=["--verbose", "--append-log"] if log else None,
        log_output=log,
    )
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


def wait(browser: Any, predicate: Callable[[Any], Any]) -> Any:
    """Wait (at most :data:`WAIT_S`) until ``predicate(browser)`` is truthy; its value."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    waiting = WebDriverWait(
        browser, WAIT_S, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    )
    return waiting.until(predicate)
