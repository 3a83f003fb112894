"""Debian's Chromium driven by Playwright, for the tests of the web client and the log page
(not Playwright's own browser download: it needs the internet)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
# Without the networking flags Chromium keeps dialling Google's hosts, which this closed
# network refuses.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]  # fmt: skip


@contextmanager
def launched() -> Iterator[Any]:
    """A headless Chromium, closed when the block ends."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make install-browser` (Debian's chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
