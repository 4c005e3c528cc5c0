"""Build this site and take a screenshot of one page in headless Chromium.

    python docs/screenshot.py                       # the Serving page -> docs/site_screenshot.png
    python docs/screenshot.py --page cli/ --out /tmp/cli.png

Needs the docs extra (`pip install -e '.[docs]'`), Playwright and Debian's `chromium`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--page", default="serving/", help="the page's path in the site")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "site_screenshot.png")
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--height", type=int, default=900)
    args = p.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("docs/screenshot.py: needs Chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as site:
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                        "--site-dir", site], cwd=ROOT, check=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": args.width, "height": args.height})
            page.goto((Path(site) / args.page / "index.html").as_uri())
            page.wait_for_load_state("load")
            page.screenshot(path=str(args.out))
            browser.close()
    print(f"{args.page} -> {args.out}")


if __name__ == "__main__":
    main()
