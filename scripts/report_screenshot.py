#!/usr/bin/env python3
"""A screenshot of a report page (testbed report) in headless Chromium, for
the docs (docs/getting-started.md shows
results/reference/report-quick.png): the top ``--width`` x ``--height`` CSS pixels, reduced to a
palette of ``--colors`` colours so the committed PNG stays small.

    .venv/bin/python scripts/report_screenshot.py results/report-.../index.html OUT.png
                     [--width 1000] [--height 760] [--colors 64]
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from PIL import Image

from testbed.browser import BrowserError, HeadlessBrowser


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page", type=Path, help="the report's index.html")
    ap.add_argument("out", type=Path, help="the PNG to write")
    ap.add_argument("--width", type=int, default=1000)
    ap.add_argument("--height", type=int, default=760)
    ap.add_argument("--colors", type=int, default=64)
    a = ap.parse_args(argv)
    if not a.page.is_file():
        print(f"error: {a.page}: no such file", file=sys.stderr)
        return 2
    if not (100 <= a.width <= 4000 and 100 <= a.height <= 8000 and 2 <= a.colors <= 256):
        print("error: need 100 <= width <= 4000, 100 <= height <= 8000, 2 <= colors <= 256",
              file=sys.stderr)
        return 2
    try:
        with HeadlessBrowser(width=a.width, height=a.height) as b:
            b.open(a.page)
            png = b.screenshot(width=a.width, height=a.height)
    except BrowserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    img = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=a.colors)
    img.save(a.out, optimize=True)
    print(f"{a.out}: {a.width}x{a.height}, {a.out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
