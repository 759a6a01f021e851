#!/usr/bin/env python3
"""Checks that keep the user docs true: the README stays within README_MAX_LINES lines; the
guides (README.md, docs/*.md) carry no dates, commit hashes or run numbers, keep prose lines short
and stay within GUIDE_MAX_LINES lines; every
ARCREDUCE_* variable of the settings table (runtime/settings.inc) has a row in
docs/configuration.md whose meaning is the row's doc and whose default is the initializer
runtime/include/arcreduce/config.h gives the row's field; and every relative link of the README, docs/ and the examples' READMEs resolves: the file exists and, where the link names an anchor (#section), the target Markdown file has a heading with that
anchor (GitHub's rule: lower case, punctuation but "-" and "_" dropped, spaces to hyphens) or an
<a id="..."> of that name.

  check_docs.py REPO_ROOT
Prints each problem (a broken link as FILE:LINE: LINK (why)) and exits 1 if there is any."""
import pathlib
import re
import sys

README_MAX_LINES = 150  # a page a user reads in two minutes
GUIDE_MAX_LINES = 300  # docs/*.md: a guide, not a notebook (docs/design/ and docs/results/ are not)
PROSE_MAX_CHARS = 100  # outside tables, code and headings
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
RUN_NUMBER = re.compile(r"\b(\d+(st|nd|rd|th)|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth)"
                        r" (run|pass|matrix)\b", re.IGNORECASE)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def anchor(heading):
    text = heading.replace("`", "").replace("*", "")  # inline markup (GitHub keeps "_")
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path, cache={}):
    if path not in cache:
        found, counts, fence = set(), {}, False
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("```"):
                fence = not fence
                continue
            if not fence:
                found.update(HTML_ANCHOR.findall(line))
            m = None if fence else HEADING.match(line)
            if m:
                a = anchor(m.group(1))
                n = counts.get(a, 0)
                counts[a] = n + 1
                found.add(a if n == 0 else f"{a}-{n}")
        cache[path] = found
    return cache[path]


def cpp_default(value):
    """A Config field's initializer as the text configuration.md shows ("" for none)."""
    if value is None:
        return ""
    value = value.strip()
    if value.startswith('"'):
        return value.strip('"')
    if value in ("true", "false"):
        return "1" if value == "true" else "0"
    if "::k" in value:  # an enum: CompressedBatching::kAuto -> auto
        return value.split("::k", 1)[1].lower()
    try:
        return str(eval(re.sub(r"(?<=\d)(ll|u|ull|LL)\b", "", value), {}))  # 64ll << 20
    except Exception:  # noqa: BLE001
        return value


def _code_without_comments(text):
    """`text` (C++) with its // comments removed; string literals kept whole."""
    out, i = [], 0
    while i < len(text):
        if text[i] == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _call_arguments(code, open_paren):
    """The arguments of the call whose "(" is at code[open_paren], split at its own commas."""
    args, current, depth, i = [], [], 0, open_paren + 1
    while True:
        c = code[i]
        if c == '"':
            j = i + 1
            while code[j] != '"':
                j += 2 if code[j] == "\\" else 1
            current.append(code[i:j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append("".join(current).strip())
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            i += 1
            continue
        current.append(c)
        i += 1


def _string(argument):
    """The text of a (possibly concatenated) C++ string literal argument."""
    pieces = re.findall(r'"((?:[^"\\]|\\.)*)"', argument)
    return "".join(p.replace('\\"', '"').replace("\\\\", "\\") for p in pieces)


def settings_rows(root):
    """The rows of runtime/settings.inc, in order: dicts of the macro ("SETTING",
    "PRESET_SETTING" or "ALIAS_SETTING"), id, name, field (the Config member it sets; an alias's
    is its variable's, none for the preset) and doc."""
    code = _code_without_comments((root / "runtime/settings.inc").read_text(encoding="utf-8"))
    rows = []
    for m in re.finditer(r"\bARCREDUCE_(SETTING|PRESET_SETTING|ALIAS_SETTING)\(", code):
        args = _call_arguments(code, m.end() - 1)
        row = {"macro": m.group(1), "id": args[0], "name": _string(args[1]),
               "doc": _string(args[-1]), "field": None}
        if m.group(1) == "SETTING":
            row["field"] = args[2]
        elif m.group(1) == "ALIAS_SETTING":
            renamed = [r for r in rows if r["id"] == args[2]]
            row["field"] = renamed[0]["field"] if renamed else None
        rows.append(row)
    return rows


def config_field_defaults(root):
    """{field: default text} of the members of Config (runtime/include/arcreduce/config.h), each
    initializer as configuration.md shows it."""
    fields = {}
    field = re.compile(r"^\s*[\w:<>]+\s+(\w+)(?:\s*=\s*([^;]+))?;")
    for line in (root / "runtime/include/arcreduce/config.h").read_text().splitlines():
        m = field.match(line)
        if m:
            fields[m.group(1)] = cpp_default(m.group(2))
    return fields


def check_configuration(root):
    """Problems of docs/configuration.md against the settings table: a row per variable, its
    meaning the table's doc, its default Config's initializer of the variable's field."""
    docs = {}  # variable -> its first row's cells: variable, meaning, accepted, default
    for line in (root / "docs/configuration.md").read_text().splitlines():
        m = re.match(r"^\| `(ARCREDUCE_[A-Z_]+)` \|", line)
        if m and m.group(1) not in docs:
            docs[m.group(1)] = [cell.strip() for cell in line.strip().strip("|").split("|")]
    rows = settings_rows(root)
    defaults = config_field_defaults(root)
    problems = []
    if not rows:
        problems.append("runtime/settings.inc: no rows found")
    for row in rows:
        variable = row["name"]
        if variable not in docs:
            problems.append(f"docs/configuration.md: no row for {variable}")
            continue
        cells = docs[variable]
        if cells[1] != row["doc"]:
            problems.append(f"docs/configuration.md: {variable} means '{cells[1]}', "
                            f"runtime/settings.inc: '{row['doc']}'")
        if row["field"] is None:
            continue  # ARCREDUCE_PRESET: no field of Config
        if row["field"] not in defaults:
            problems.append(f"runtime/settings.inc: {variable} sets Config::{row['field']}, "
                            "which config.h does not declare")
            continue
        shown = cells[-1].replace("`", "").split(" ")[0]
        want = defaults[row["field"]]
        same = (shown == want or (shown == "unset" and want == "")
                or _numbers_equal(shown, want))
        if not same:
            problems.append(f"docs/configuration.md: {variable} default '{cells[-1]}', "
                            f"config.h: '{want}'")
    known = {row["name"] for row in rows}
    for variable in docs:
        if variable not in known:
            problems.append(f"docs/configuration.md: {variable} is not a setting of "
                            "runtime/settings.inc")
    return problems


def _numbers_equal(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def check_guide(root, md):
    """A guide (README.md, docs/*.md) states what holds now: no dates, commit hashes or run
    numbers (those belong in the dated logs under docs/results/), prose lines of at most
    PROSE_MAX_CHARS, and at most GUIDE_MAX_LINES lines."""
    problems, fence = [], False
    lines = md.read_text(encoding="utf-8").splitlines()
    name = md.relative_to(root)
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        for pattern, what in ((DATE, "a date"), (COMMIT, "a commit hash"),
                              (RUN_NUMBER, "a run number")):
            m = pattern.search(line)
            if m:
                problems.append(f"{name}:{number}: {what} ('{m.group(0)}'): link the log instead")
        prose = not (fence or line.startswith(("|", "    ", "#", "<", "![")))
        if prose and len(line) > PROSE_MAX_CHARS:
            problems.append(f"{name}:{number}: {len(line)} characters, more than "
                            f"{PROSE_MAX_CHARS}")
    if md.parent == root / "docs" and len(lines) > GUIDE_MAX_LINES:
        problems.append(f"{name}: {len(lines)} lines, more than {GUIDE_MAX_LINES}")
    return problems


def markdown_files(root):
    yield root / "README.md"
    yield from sorted((root / "docs").rglob("*.md"))
    yield from sorted((root / "examples").glob("*/README.md"))
    yield from sorted((root / "bench").rglob("README.md"))


def main(root):
    broken = []
    for md in markdown_files(root):
        fence = False
        for number, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fence = not fence
            if fence:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                    continue
                path_part, _, frag = target.partition("#")
                dest = md if not path_part else (md.parent / path_part)
                where = f"{md.relative_to(root)}:{number}: {target}"
                if not dest.exists():
                    broken.append(f"{where} (no such file)")
                elif frag and dest.suffix == ".md" and frag not in anchors_of(dest.resolve()):
                    broken.append(f"{where} (no heading '#{frag}' in {dest.name})")
    broken += check_configuration(root)
    for guide in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        broken += check_guide(root, guide)
    lines = len((root / "README.md").read_text(encoding="utf-8").splitlines())
    if lines > README_MAX_LINES:
        broken.append(f"README.md: {lines} lines, more than {README_MAX_LINES}")
    for b in broken:
        print(b)
    print(f"check_docs: {len(broken)} problem(s)" if broken
          else f"check_docs: every link resolves; README.md has {lines} lines")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
