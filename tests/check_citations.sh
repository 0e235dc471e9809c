#!/bin/bash
# Citations of perf/NOTES.md's numbered rows take one form everywhere:
#
#     NOTES row 303    NOTES rows 296-297    NOTES rows 144-147 and 173    NOTES rows 271, 272 and 290
#
# the word NOTES, a space (or a line break, with the comment leader of the next line), "row" for
# one row and "rows" for a range or a list, then the rows: ids such as 303 or 16d, a range as
# A-B, a list as "A, B and C"; it may sit in parentheses. No backquotes, no path, no comma after
# NOTES. A link to NOTES.md as a document (no row) is not a citation.
#
# Usage: bash tests/check_citations.sh [REPO_ROOT]   (default: the checkout holding this script)
#
# Over every tracked text file (git ls-files; a find over the tree when REPO_ROOT is not a git
# checkout), except the data under perf/results/ (.json, .csv, .txt, .svg) and tests/fuzz/, it
# fails (exit 1, each offence as FILE:LINE: TEXT) on
#   (a) a row citation in another form:
#       - NOTES, NOTES.md or perf/NOTES.md followed within a few characters by row/rows, other
#         than in the form above (anywhere in any of those files);
#       - "row N" or "rows N" with N a row id (an integer, maybe with one letter, not a decimal
#         such as 81.5 nor the start of a range such as 0..3) without NOTES before it, in
#         markdown files and in the comments of C/C++, Python and shell files;
#   (b) a cited row that perf/NOTES.md has not: a table line beginning "| ID |".
# When all is well it prints how many citations it checked. Exit status: 0 all well, 1 an
# offence, 2 bad usage (no perf/NOTES.md under REPO_ROOT, or no python3).
set -u
ROOT=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
if [ ! -f "$ROOT/perf/NOTES.md" ]; then
    echo "check_citations: no perf/NOTES.md under $ROOT" >&2
    exit 2
fi
command -v python3 >/dev/null || {
    echo "check_citations: python3 is needed" >&2
    exit 2
}
cd "$ROOT" || exit 2
if git rev-parse --is-inside-work-tree >/dev/null 2>&1 && [ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
    LIST=$(git ls-files -z | tr '\0' '\n')
else
    LIST=$(find . -type d \( -name .git -o -name 'build*' -o -name node_modules \) -prune -o -type f -print |
        sed 's#^\./##')
fi
printf '%s\n' "$LIST" | exec python3 -c '
import re, sys

def excluded(path):
    if path.startswith("tests/fuzz/"):
        return True
    return path.startswith("perf/results/") and path.endswith((".json", ".csv", ".txt", ".svg"))

ID = r"\d+[a-z]?\b(?!\.\d|\.\.)"              # 303, 16d; not 81.5, not 0..3
RANGE = ID + "(?:-" + ID + ")?"
# a break between words: one space, or a line break and the next line comment leader
BREAK = r"[ \t]*\n[ \t]*(?:#+|//+|\*|--)?[ \t]*"
GAP = "(?: |" + BREAK + ")"
WS = r"(?:[ \t]+|" + BREAK + ")"
LOOSE_LIST = RANGE + "(?:(?:," + WS + "?|" + WS + "and" + WS + ")" + RANGE + ")*"
NOTES_WORD = "NO" + "TES"                       # spelt apart so that this file does not cite
CANON = re.compile(r"(?<![\w/.`-])" + NOTES_WORD + GAP + r"(?P<word>rows?)" + GAP + r"(?P<list>" + LOOSE_LIST + ")")
# NOTES in any dress, then a few characters, then row/rows
ANY_NOTES = re.compile(r"(?:perf/)?" + NOTES_WORD + r"(?:\.md)?[^\w\n]{0,4}(?:\n[ \t]*(?:#+|//+|\*|--)?[^\w\n]{0,4})?[Rr]ows?\b")
BARE = re.compile(r"\b[Rr]ows?" + GAP + "(?P<list>" + LOOSE_LIST + ")")

def rows_in_notes():
    ids = set()
    for line in open("perf/NOTES.md", encoding="utf-8"):
        m = re.match(r"\|\s*(\d+[a-z]?)\s*\|", line)
        if m:
            ids.add(m.group(1))
    return ids

ROWS = rows_in_notes()

def unbroken(text):
    return " ".join(re.sub(BREAK, " ", text).split())

def items_of(text):
    return [x for x in re.split(r",\s*|\s+and\s+", unbroken(text)) if x]

def canonical_list(items):
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

def missing(items):
    bad = []
    for item in items:
        ends = item.split("-")
        for e in ends:
            if e not in ROWS:
                bad.append(e)
        if len(ends) == 2 and ends[0].isdigit() and ends[1].isdigit():
            a, b = int(ends[0]), int(ends[1])
            if a >= b:
                bad.append(item)
            bad += [str(k) for k in range(a + 1, b) if str(k) not in ROWS]
    return bad

def comments(path, text):
    """The text with everything but comments blanked (newlines kept), or None for no comments."""
    if path.endswith(".md"):
        return text
    out = [" " if c != "\n" else c for c in text]
    if path.endswith((".c", ".h", ".cc", ".cpp", ".hpp", ".cxx", ".hh")):
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if text.startswith("//", i):
                j = text.find("\n", i)
                j = n if j < 0 else j
                out[i:j] = text[i:j]
                i = j
            elif text.startswith("/*", i):
                j = text.find("*/", i + 2)
                j = n if j < 0 else j + 2
                out[i:j] = text[i:j]
                i = j
            elif c in "\"\x27":
                j = i + 1
                while j < n and text[j] != c and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                i = j + 1
            else:
                i += 1
        return "".join(out)
    shell = path.endswith((".sh", ".bash")) or text.startswith("#!") and ("sh" in text.split("\n", 1)[0])
    if path.endswith(".py") or shell or path.endswith("CMakeLists.txt") or path.endswith(".cmake"):
        pos = 0
        for line in text.split("\n"):
            quote = None
            for k, c in enumerate(line):
                if quote:
                    if c == quote:
                        quote = None
                elif c in "\"\x27":
                    quote = c
                elif c == "#" and (k == 0 or line[k - 1] in " \t"):
                    out[pos + k:pos + len(line)] = line[k:]
                    break
            pos += len(line) + 1
        return "".join(out)
    return None

offences, checked, nfiles = [], 0, 0
for path in sys.stdin.read().split("\n"):
    if not path or excluded(path):
        continue
    try:
        raw = open(path, "rb").read()
    except OSError:
        continue
    if b"\0" in raw[:8192]:
        continue
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        continue
    nfiles += 1
    lineno = lambda pos: text.count("\n", 0, pos) + 1
    flat = unbroken
    canon_spans = []
    for m in CANON.finditer(text):
        checked += 1
        items = items_of(m.group("list"))
        want_word = "row" if len(items) == 1 and "-" not in items[0] else "rows"
        tail = m.group("list")
        shape_ok = m.group("word") == want_word and flat(tail) == canonical_list(items)
        if not shape_ok:
            offences.append((path, lineno(m.start()), flat(m.group(0)), "not in the form " + NOTES_WORD + " " + want_word + " " + canonical_list(items)))
        bad = missing(items)
        if bad:
            offences.append((path, lineno(m.start()), flat(m.group(0)), "no such row in perf/NOTES.md: " + ", ".join(bad)))
        canon_spans.append((m.start(), m.end()))
    def in_canon(pos):
        return any(a <= pos < b for a, b in canon_spans)
    for m in ANY_NOTES.finditer(text):
        if not in_canon(m.start()) or not text.startswith(NOTES_WORD, m.start()) or \
                (m.start() > 0 and (text[m.start() - 1].isalnum() or text[m.start() - 1] in "/.`-_")):
            checked += 1
            end = text.find("\n", m.end())
            offences.append((path, lineno(m.start()), flat(text[m.start():min(m.end() + 12, end if end >= 0 else len(text))]), "a row citation in another form"))
    scope = comments(path, text)
    if scope is not None:
        for m in BARE.finditer(scope):
            before = scope[max(0, m.start() - 40):m.start()]
            if re.search(NOTES_WORD + r"(?:\.md)?`?,?\s*(?:#+|//+|\*|--)?\s*$", before) or in_canon(m.start()):
                continue
            checked += 1
            offences.append((path, lineno(m.start()), flat(m.group(0)), "a row cited without " + NOTES_WORD))
for path, line, what, why in sorted(set(offences)):
    print(f"{path}:{line}: {what}  ({why})")
if offences:
    print(f"check_citations: {len(set(offences))} offence(s) in {checked} citations over {nfiles} files", file=sys.stderr)
    sys.exit(1)
print(f"check_citations: {checked} citations checked over {nfiles} files, all in the one form and all rows present")
'
