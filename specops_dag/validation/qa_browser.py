"""The browser half of QA: `python -m specops_dag.validation.qa_browser JOB.json` opens each
page in Debian's Chromium through Playwright (never a downloaded browser), saves a screenshot
and the visible text, and writes `browser.json`. It runs as a child of `qa` through the one
process runner, so the QA deadline and the whole-tree kill cover Playwright's driver and
Chromium.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Debian's Chromium headless, with nothing that reaches the network or a profile of the user;
# Playwright adds --headless and a fresh --user-data-dir of its own.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
TEXT_WAIT_MS = 10_000


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    out = Path(job["out"])
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        (out / "browser.json").write_text(json.dumps({
            "unavailable": "Playwright is not installed (pip install 'specops-dag[qa]')"}))
        return 0
    pages = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=job["chromium"], headless=True,
                                    args=CHROMIUM_ARGS)
        try:
            for spec in job["pages"]:
                pages.append(open_page(browser, job, spec, out, Error))
        finally:
            browser.close()
    (out / "browser.json").write_text(json.dumps({"pages": pages}, indent=2))
    return 0


def open_page(browser, job: dict, spec: dict, out: Path, error: type[Exception]) -> dict:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    shot, text_file = f"page-{spec['id']}.png", f"page-{spec['id']}.txt"
    try:
        response = page.goto(job["base"] + spec["path"], wait_until="load",
                             timeout=job["timeout_s"] * 1000)
        for text in spec["text_contains"]:  # scripts may still be filling the page in
            try:
                page.get_by_text(text).first.wait_for(timeout=TEXT_WAIT_MS)
            except error:
                pass  # judged from the saved text: a missing text fails the page there
        page.screenshot(path=str(out / shot), full_page=True)
        text = page.inner_text("body")
        (out / text_file).write_text(text, encoding="utf-8")
        return {"id": spec["id"], "status": response.status if response else None,
                "text": text, "files": [shot, text_file]}
    except error as err:
        return {"id": spec["id"], "error": f"the browser could not open it: {err}".splitlines()[0],
                "files": [f for f in (shot, text_file) if (out / f).exists()]}
    finally:
        page.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
