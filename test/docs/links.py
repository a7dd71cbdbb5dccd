#!/usr/bin/env python3
"""Every link of the project's Markdown files resolves.

    test/docs/links.py [FILE.md ...]     (default: every tracked *.md)

A relative link must name a file or folder of the tree, and its #anchor a
heading of that file (GitHub's rule: lower case, punctuation but '-' and
'_' dropped, spaces to '-', a repeated heading gets -1, -2, ...).  Links in
fenced code blocks and inline code are not links.  Absolute URLs are not
fetched (there is no network to fetch them from).  Prints one line per
broken link and "N links checked, M broken"; exits 1 when M > 0.
"""
import os
import re
import subprocess
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")


def slug(text):
    text = re.sub(r"`", "", text.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(path):
    """The lines of a Markdown file outside fenced code, inline code blanked."""
    fence = None
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        m = re.match(r"^\s*(```|~~~)", line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence:
            continue
        yield n, re.sub(r"`[^`]*`", "``", line)


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, out = {}, set()
        for _, line in prose_lines(path):
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(m.group(2))
            k = seen.get(s, 0)
            out.add(s if k == 0 else f"{s}-{k}")
            seen[s] = k + 1
        _anchors[path] = out
    return _anchors[path]


def main():
    os.chdir(TOP)
    files = sys.argv[1:] or subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*.md"],
        capture_output=True, text=True, check=True).stdout.split()
    checked = broken = 0
    for f in files:
        if not os.path.exists(f):
            continue
        for n, line in prose_lines(f):
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                checked += 1
                path, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
                why = None
                if not os.path.exists(dest):
                    why = "no such file"
                elif frag and dest.endswith(".md") and frag not in anchors(dest):
                    why = "no such heading"
                if why:
                    broken += 1
                    print(f"{f}:{n}: {target}: {why}")
    print(f"{checked} links checked, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
