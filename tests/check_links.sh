#!/usr/bin/env bash
# Every relative link of the project's documentation resolves (a ctest test):
#   check_links.sh [REPO_ROOT]        (default: the folder above this script's)
# Checks README.md, every engine/*.md, perf/README.md, perf/RESULTS.md and perf/NOTES.md (those
# that exist; README.md and engine/README.md must). For each [text](target), ![alt](target) and
# [label]: target outside fenced code blocks and inline code, and not http(s), mailto or another
# scheme: the target (relative to the linking file; a bare #anchor means the file itself) must
# exist, and an #anchor into a markdown file must be one of its headings' GitHub slugs (lower
# case; every character but letters, digits, spaces, '-' and '_' removed; spaces to '-'; the
# second of two equal slugs gets -1, the third -2...) or an <a id="..."> / <a name="...">.
# Exit 1 naming every broken link as file:line: target (why); else print how many were checked.
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
exec python3 - "$root" <<'PY'
import os, re, sys, unicodedata
from urllib.parse import unquote

root = sys.argv[1]
required = ["README.md", "engine/README.md"]
optional = ["perf/README.md", "perf/RESULTS.md", "perf/NOTES.md"]
problems = []
files = []
for f in required:
    if os.path.isfile(os.path.join(root, f)):
        files.append(f)
    else:
        problems.append(f"{f}: missing (a page this check requires)")
engine = os.path.join(root, "engine")
if os.path.isdir(engine):
    files += sorted("engine/" + n for n in os.listdir(engine)
                    if n.endswith(".md") and n != "README.md" and os.path.isfile(os.path.join(engine, n)))
files += [f for f in optional if os.path.isfile(os.path.join(root, f))]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")

def mask_code(text):
    """The text with fenced code blocks and inline code spans blanked (newlines kept, so that
    offsets still give line numbers)."""
    lines = text.split("\n")
    out, fence = [], None
    for line in lines:
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            out.append(" " * len(line))
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and line.strip() == m.group(1):
                fence = None
            out.append(" " * len(line))
        else:
            out.append(line)
    text = "\n".join(out)
    # Inline code: a run of n backticks up to the next run of exactly n, within one paragraph.
    chars = list(text)
    i, n = 0, len(text)
    while i < n:
        if text[i] != "`":
            i += 1
            continue
        j = i
        while j < n and text[j] == "`":
            j += 1
        run = j - i
        k = j
        close = -1
        while k < n:
            if text[k] == "`":
                e = k
                while e < n and text[e] == "`":
                    e += 1
                if e - k == run:
                    close = k
                    break
                k = e
            else:
                k += 1
        if close < 0 or re.search(r"\n[ \t]*\n", text[j:close]):
            i = j  # no closing run in this paragraph: literal backticks
            continue
        for x in range(i, close + run):
            if chars[x] != "\n":
                chars[x] = " "
        i = close + run
    return "".join(chars)

def plain_heading(h):
    h = re.sub(r"\s+#+\s*$", "", h.strip())               # closing #s
    h = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", h)       # links and images: their text
    h = re.sub(r"<[^>]+>", "", h)                          # HTML tags
    return h.strip()

def slug(h):
    out = []
    for ch in plain_heading(h).lower():
        cat = unicodedata.category(ch)
        if ch in " -_" or cat.startswith("L") or cat == "Nd" or cat.startswith("M"):
            out.append("-" if ch == " " else ch)
    return "".join(out)

anchor_cache = {}

def anchors(path):
    if path in anchor_cache:
        return anchor_cache[path]
    with open(path, encoding="utf-8") as fh:
        raw = fh.read()
    masked = mask_code(raw)
    found, seen = set(), {}
    lines = masked.split("\n")
    rawlines = raw.split("\n")
    for idx, line in enumerate(lines):
        heading = None
        m = re.match(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$", line)
        if m:
            heading = rawlines[idx].strip()[len(m.group(1)):]
        elif idx > 0 and re.match(r"^ {0,3}(=+|-+)[ \t]*$", line) and lines[idx - 1].strip() \
                and not re.match(r"^ {0,3}(#|[-*+] |\d+[.)] |>|\|)", lines[idx - 1]):
            heading = rawlines[idx - 1]
        if heading is not None:
            s = slug(heading)
            if s in seen:
                seen[s] += 1
                s = f"{s}-{seen[s]}"
            else:
                seen[s] = 0
            found.add(s)
        for a in re.finditer(r"<a\s[^>]*?\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", line):
            found.add(a.group(1))
    for a in re.finditer(r"<a\s[^>]*?\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", raw):
        found.add(a.group(1))
    anchor_cache[path] = found
    return found

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
                  r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>\n]*>|\S+)", re.M)

checked = 0
for rel in files:
    path = os.path.join(root, rel)
    with open(path, encoding="utf-8") as fh:
        text = mask_code(fh.read())
    targets = [(m.start(), m.group(1)) for m in LINK.finditer(text)]
    targets += [(m.start(), m.group(1)) for m in REFDEF.finditer(text)]
    for pos, target in sorted(targets):
        line = text.count("\n", 0, pos) + 1
        if target.startswith("<") and target.endswith(">"):
            target = target[1:-1]
        if not target or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("//"):
            continue  # http(s), mailto and other schemes: not ours to check
        checked += 1
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part.split("?", 1)[0])
        dest = path if file_part == "" else os.path.normpath(
            os.path.join(os.path.dirname(path), file_part))
        if file_part.startswith("/"):
            problems.append(f"{rel}:{line}: {target} (an absolute path)")
            continue
        if not os.path.exists(dest):
            problems.append(f"{rel}:{line}: {target} (no such file)")
            continue
        if anchor and os.path.isfile(dest) and dest.endswith(".md"):
            if unquote(anchor) not in anchors(dest):
                problems.append(f"{rel}:{line}: {target} (no heading or anchor "
                                f"#{unquote(anchor)} in {os.path.relpath(dest, root)})")

if problems:
    print(f"check_links: {len(problems)} broken link(s) of {checked} checked:")
    for p in problems:
        print("  " + p)
    sys.exit(1)
print(f"check_links: {checked} relative links in {len(files)} files, all resolve "
      f"({', '.join(files)})")
PY
