"""A page in a real browser: Debian's chromium driven by playwright, with every console error the page logs.

CI installs both (.ci/browser-setup.sh, the dev extra) and sets CMX_REQUIRE_BROWSER=1: a missing one fails there;
elsewhere the tests that need them are skipped with NO_BROWSER as the reason."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_BROWSER = ("Debian's chromium is not installed (.ci/browser-setup.sh)" if CHROMIUM is None else
              "playwright is not installed (the dev extra)" if importlib.util.find_spec("playwright") is None else
              None)
if NO_BROWSER and os.environ.get("CMX_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"CMX_REQUIRE_BROWSER=1 but {NO_BROWSER}")


@contextmanager
def opened(path: Path) -> Iterator[tuple[Any, list[str]]]:
    """The page at `path`, loaded, and the list its console errors and uncaught exceptions go to."""
    from playwright import sync_api

    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(path.as_uri())
            yield page, errors
        finally:
            browser.close()
