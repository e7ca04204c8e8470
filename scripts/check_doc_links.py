#!/usr/bin/env python3
"""Check that every relative link in README.md and docs/*.md points to an existing file.

Markdown links ``[text](target)`` (and ``[text]: target`` references) whose target is not a URL
or a pure ``#anchor`` are resolved against the linking file's folder; a ``#fragment`` is dropped.
With ``--code-paths`` it also checks repository paths written in backticks
(```docs/x.md```, ```benchmarks/x.py```, ...), resolved against the repository root.

Exit status 1 if anything is missing; prints ``file:line: target`` for each miss.
Usage: ``python scripts/check_doc_links.py [--code-paths] [ROOT]``
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?")
REF = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)")
CODE_PATH = re.compile(r"`((?:docs|src|tests|benchmarks|scripts|results)/[A-Za-z0-9_./-]+)`")
FENCE = re.compile(r"^\s*(```|~~~)")


def _external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("#")


def check(root: Path, code_paths: bool = False) -> list[str]:
    files = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    missing = []
    for f in files:
        if not f.exists():
            continue
        in_fence = False
        for lineno, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            targets = LINK.findall(line) + IMAGE.findall(line) + REF.findall(line)
            for t in targets:
                if _external(t):
                    continue
                path = t.split("#", 1)[0]
                if path and not (f.parent / path).exists():
                    missing.append(f"{f.relative_to(root)}:{lineno}: link {t}")
            if code_paths:
                for t in CODE_PATH.findall(line):
                    path = t.split("::", 1)[0].rstrip(".,;:")
                    if "*" in path or "{" in path:
                        continue
                    if not (root / path).exists():
                        missing.append(f"{f.relative_to(root)}:{lineno}: path {t}")
    return missing


def main(argv: list[str]) -> int:
    code_paths = "--code-paths" in argv
    args = [a for a in argv if not a.startswith("--")]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    missing = check(root, code_paths)
    for m in missing:
        print(m)
    print(f"{len(missing)} missing", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
