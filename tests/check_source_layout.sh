#!/usr/bin/env bash
# A folder's files against the README that lists them (a ctest test):
#   check_source_layout.sh README DIR...
# e.g. check_source_layout.sh engine/README.md engine engine/include simd threads tests
# 1. Every file directly inside each DIR (not recursive; from `git ls-files` in a git checkout,
#    else from find), and every subfolder of it that holds such files, written `name/`, must be
#    named in README as a word: `kdtree.c`, `consumer/` (a path ending in the name counts too).
# 2. Every file name in README's source-layout section (the section whose heading says
#    "layout"; the whole README if none does) must exist. A name with a folder in it is checked
#    when the folder is a DIR, a DIR's last part or one of its subfolders
#    (`engine/kdtree.c`, `include/broadphase.h`, `fuzz/fuzz_calls.c`), relative to the
#    repository root, to a DIR or to a DIR's parent; other paths are not this check's. A bare
#    name (`bits.h`) must be directly in a DIR or in a subfolder of one, or, failing that,
#    anywhere among the repository's files (a layout may name another folder's file in
#    passing). A file name is a word ending in a source or data extension (.c .h .cc .cpp .in
#    .sh .py .cmake .supp .md .txt .json .svg .csv): `heap.*` and `config.method` are not;
#    nor is a former name, right after "was", "formerly" or "moved from".
# Relative paths are taken from the current folder, else from the repository root (the folder
# above this script's). Exit 1 naming each file missing from README and each name in it that
# does not exist.
set -euo pipefail
if [ "$#" -lt 2 ]; then
    echo "usage: $0 README DIR..." >&2
    exit 2
fi
script_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
resolve() { # a path as given, or relative to the repository root
    if [ -e "$1" ]; then printf '%s\n' "$1"; elif [ -e "$script_root/$1" ]; then
        printf '%s\n' "$script_root/$1"; else printf '%s\n' "$1"; fi
}
readme="$(resolve "$1")"
shift
if [ ! -f "$readme" ]; then
    echo "check_source_layout: $readme: no such file" >&2
    exit 1
fi
dirs=()
for d in "$@"; do dirs+=("$(resolve "$d")"); done

exec python3 - "$readme" "${dirs[@]}" <<'PY'
import os, re, subprocess, sys

readme, dirs = sys.argv[1], sys.argv[2:]

def git_root(path):
    try:
        out = subprocess.run(["git", "-C", path, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        return out or None
    except (OSError, subprocess.CalledProcessError):
        return None

def tracked(d):
    """(files, subfolders, every file below) of folder d: git's tracked ones in a checkout."""
    files, subs, below = set(), set(), []
    top = git_root(d) if os.path.isdir(d) else None
    if top:
        out = subprocess.run(["git", "-C", d, "ls-files", "-z", "--full-name", "--", "."],
                             capture_output=True, text=True, check=True).stdout
        prefix = os.path.relpath(os.path.realpath(d), os.path.realpath(top)).replace(os.sep, "/")
        prefix = "" if prefix == "." else prefix + "/"
        for p in filter(None, out.split("\0")):
            rest = p[len(prefix):] if p.startswith(prefix) else p
            below.append(rest)
            if "/" in rest:
                subs.add(rest.split("/", 1)[0])
            else:
                files.add(rest)
    elif os.path.isdir(d):
        for base, dnames, fnames in os.walk(d):
            dnames[:] = [n for n in dnames if not n.startswith(".")]
            for n in fnames:
                rest = os.path.relpath(os.path.join(base, n), d).replace(os.sep, "/")
                below.append(rest)
                if "/" in rest:
                    subs.add(rest.split("/", 1)[0])
                else:
                    files.add(rest)
    return files, subs, below

problems = []
with open(readme, encoding="utf-8") as fh:
    text = fh.read()

def named(name):
    # The name as a word: not inside a longer name (a path before it is fine: engine/kdtree.c).
    after = "" if name.endswith("/") else r"(?![A-Za-z0-9_+-]|\.[A-Za-z0-9_])"
    return re.search(r"(?<![A-Za-z0-9_.+-])" + re.escape(name) + after, text) is not None

# 1. The folders' files are named.
listing = {}
named_count = 0
for d in dirs:
    if not os.path.isdir(d):
        problems.append(f"{d}: no such folder")
        continue
    files, subs, below = tracked(d)
    listing[d] = (files, subs, below)
    for f in sorted(files):
        named_count += 1
        if not named(f):
            problems.append(f"{os.path.join(d, f)}: not named in {readme}")
    for s in sorted(subs):
        named_count += 1
        if not named(s + "/"):
            problems.append(f"{os.path.join(d, s)}/: not named in {readme} (as `{s}/`)")

# 2. The names in the layout section exist.
lines = text.split("\n")
section, start, level = None, None, None
for i, line in enumerate(lines):
    m = re.match(r"^(#{1,6})\s+(.*)", line)
    if m and start is not None and len(m.group(1)) <= level:
        section = "\n".join(lines[start:i])
        break
    if m and start is None and re.search(r"layout", m.group(2), re.I):
        start, level = i + 1, len(m.group(1))
if start is not None and section is None:
    section = "\n".join(lines[start:])
if section is None:
    section = text

EXT = r"(?:c|h|cc|cpp|in|sh|py|cmake|supp|md|txt|json|svg|csv)"
NAME = re.compile(r"(?<![A-Za-z0-9_./+*-])((?:[A-Za-z0-9_.+-]+/)*[A-Za-z0-9_+-][A-Za-z0-9_.+-]*\." + EXT +
                  r")(?![A-Za-z0-9_/+*-]|\.[A-Za-z0-9_])")
repo = (git_root(os.path.dirname(os.path.abspath(readme))) or
        next((r for r in (git_root(d) for d in dirs if os.path.isdir(d)) if r), None) or
        os.path.dirname(os.path.abspath(readme)))
repo_names = None

def anywhere(base):
    global repo_names
    if repo_names is None:
        repo_names = {os.path.basename(p) for p in tracked(repo)[2]}
    return base in repo_names

bases = [repo] + dirs + [os.path.dirname(os.path.normpath(d)) or "." for d in dirs]
dir_rels = [os.path.relpath(os.path.abspath(d), repo).replace(os.sep, "/") for d in dirs]
firsts = {os.path.basename(os.path.normpath(d)) for d in dirs}
for d in dirs:
    firsts |= listing.get(d, ((), set(), ()))[1]
exists_count = 0
FORMER = re.compile(r"\b(?:was|were|formerly|previously|renamed from|moved from)\s+[`'\"]?$", re.I)
names = {m.group(1) for m in NAME.finditer(section)
         if not FORMER.search(section[max(0, m.start() - 20):m.start()])}
for name in sorted(names):
    if "/" in name and not (any(name.startswith(r + "/") for r in dir_rels) or
                            name.split("/", 1)[0] in firsts):
        continue  # a path outside the folders checked: not this layout's to vouch for
    exists_count += 1
    if "/" in name:
        ok = any(os.path.exists(os.path.join(b, name)) for b in bases)
    else:
        ok = any(os.path.exists(os.path.join(d, name)) or
                 any(os.path.exists(os.path.join(d, sub, name)) for sub in listing.get(d, ((), (), ()))[1])
                 for d in dirs) or anywhere(name)
    if not ok:
        problems.append(f"{readme}: names {name}, which does not exist")

if problems:
    print(f"check_source_layout: {len(problems)} problem(s):")
    for p in problems:
        print("  " + p)
    sys.exit(1)
print(f"check_source_layout: {readme} names all {named_count} files and folders of "
      f"{', '.join(dirs)}, and the {exists_count} file names in its layout all exist")
PY
