"""Screenshots of the chat page's main states, written to docs/img/serve_*.png.

Runs the browser tests (tests/web) with ``CONVRAG_SCREENSHOTS`` pointing at the output folder: the same real
``convrag serve`` process and headless Chromium the tests use, so every picture is a state a test asserted.

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/screenshots.py [--out docs/img] [--only citation,phone]

``--only`` keeps the named pictures (serve_NAME.png) and removes the others it wrote, so the committed set stays small.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NAMES = ("streaming", "citation", "cancelled", "chinese", "documents", "phone")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(REPO / "docs" / "img"), help="folder for serve_*.png (default docs/img)")
    parser.add_argument("--only", default=None, help=f"comma-separated names to keep, of {', '.join(NAMES)}")
    args = parser.parse_args()
    keep = NAMES if args.only is None else tuple(n.strip() for n in args.only.split(",") if n.strip())
    unknown = sorted(set(keep) - set(NAMES))
    if unknown:
        parser.error(f"--only names {unknown} are not among {list(NAMES)}")
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="convrag-shots-") as scratch:
        env = dict(os.environ, CONVRAG_SCREENSHOTS=scratch, PYTHONPATH=str(REPO))
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/web"],
                             cwd=REPO, env=env)
        if run.returncode != 0:
            print(f"the browser tests failed (exit {run.returncode}); no screenshots written", file=sys.stderr)
            return run.returncode
        out.mkdir(parents=True, exist_ok=True)
        for name in keep:
            source = Path(scratch) / f"serve_{name}.png"
            target = out / source.name
            target.write_bytes(source.read_bytes())
            print(f"{target} ({target.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
