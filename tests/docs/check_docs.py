#!/usr/bin/env python3
"""Checks that keep the user docs true: the README stays within README_MAX_LINES lines; the
guides (README.md, docs/*.md) carry no dates, commit hashes or run numbers, keep prose lines short
and stay within GUIDE_MAX_LINES lines; the design pages (docs/design/*.md) carry no dates, commit
hashes or run numbers either (a link's target may: it names a dated log's heading); every
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
LINK_TARGET = re.compile(r"(?<=\]\()[^)\s]+(?=\))")  # a link's target: "(...)" after "]("
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


def check_guide(root, md, design=False):
    """A guide (README.md, docs/*.md) states what holds now: no dates, commit hashes or run
    numbers (those belong in the dated logs under docs/results/; a link's target, which may name a
    dated log's heading, is not read), prose lines of at most PROSE_MAX_CHARS, and at most
    GUIDE_MAX_LINES lines. A design page (docs/design/*.md, `design`) is held to the first rule
    only."""
    problems, fence = [], False
    lines = md.read_text(encoding="utf-8").splitlines()
    name = md.relative_to(root)
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        shown = LINK_TARGET.sub(lambda m: " " * len(m.group(0)), line)
        for pattern, what in ((DATE, "a date"), (COMMIT, "a commit hash"),
                              (RUN_NUMBER, "a run number")):
            m = pattern.search(shown)
            if m:
                problems.append(f"{name}:{number}: {what} ('{m.group(0)}'): link the log instead")
        if design:
            continue
        prose = not (fence or line.startswith(("|", "    ", "#", "<", "![")))
        if prose and len(line) > PROSE_MAX_CHARS:
            problems.append(f"{name}:{number}: {len(line)} characters, more than "
                            f"{PROSE_MAX_CHARS}")
    if not design and md.parent == root / "docs" and len(lines) > GUIDE_MAX_LINES:
        problems.append(f"{name}: {len(lines)} lines, more than {GUIDE_MAX_LINES}")
    return problems

# ---- figures: every number beside a log stays the log's ----------------------------------------

# A figure: digits with optional thousands commas and decimals, not part of a word, a path or a
# version (fp16, examples/03, 1.13.1) and not a list marker; a following unit is allowed (0.26x,
# 86.8%, 25mbit).
FIGURE = re.compile(r"(?<![\w./\\])(?<![A-Za-z_]-)(?:-(?=\d))?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
                    r"(?![\d.]\d|[,]\d{3}\b|[/\\]\w)")
# A unit after a figure makes it a measurement (checked even in a sentence without a link).
MEASURED = re.compile(r"(?:-\d[\d.,]*)?\s?(?:x\b|%|ms\b|s\b|us\b|[KMG]i?B\b|[MG]bit/s|min\b|"
                      r"minutes?\b|hours?\b|steps?\b|points?\b|seeds?\b|passes\b|core)")
INLINE_CODE = re.compile(r"`[^`]*`")
IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
LINK_PARTS = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[`*_])")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
# Numbers a guide may state beside a log without the log holding them: at most five, each with
# its reason.
FIGURE_EXCEPTIONS = {
    # The ARC-Top-K paper's own reported saving, quoted to compare with what was measured here.
    "docs/reproducing-the-papers.md": {"60.7"},
}


def figure_key(text):
    """A figure as compared: commas dropped, trailing zeros of a decimal dropped (0.60 = 0.6)."""
    text = text.replace(",", "").lstrip("-")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def _log_sections(path):
    """{anchor: text} of a Markdown log's headings (each heading's section up to the next heading
    of the same or a higher level), and None: the whole file."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    sections, counts, open_ = {None: "\n".join(lines)}, {}, []
    for line in lines:
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            level = len(m.group(1))
            open_ = [(lv, a) for lv, a in open_ if lv < level]
            a = anchor(m.group(2))
            n = counts.get(a, 0)
            counts[a] = n + 1
            a = a if n == 0 else f"{a}-{n}"
            sections[a] = ""
            open_.append((level, a))
        for _, a in open_:
            sections[a] += line + "\n"
    return sections


def log_figures(root, target, cache={}):
    """The figures of a linked log ((path, anchor)): the anchor's section of a Markdown log, the
    whole of any other text file under docs/results/."""
    if target not in cache:
        path, frag = target
        if path.suffix == ".md":
            text = _log_sections(path).get(frag or None, "")
        else:
            text = path.read_text(encoding="utf-8", errors="replace")
        cache[target] = {figure_key(m.group(1)) for m in FIGURE.finditer(text)}
    return cache[target]


def _figures_of(text):
    """The figures of a sentence or table row, (offset, figure, measured): code, images, link targets and
    link texts that name a file left out."""
    def blank(m):
        return " " * len(m.group(0))

    def link(m):
        label, keep = m.group(1), True
        if "/" in label or re.search(r"\.\w{2,4}$", label):
            keep = False  # [results/tta/table.md](...): a file name, not a figure
        shown = label if keep else " " * len(label)
        return " " + shown + " " * (len(m.group(0)) - len(label) - 1)
    text = INLINE_CODE.sub(blank, text)
    text = IMAGE.sub(blank, text)
    text = LINK_PARTS.sub(link, text)
    text = re.sub(r"<[^>]+>", blank, text)
    return [(m.start(1), m.group(1), bool(MEASURED.match(text, m.end())))
            for m in FIGURE.finditer(text)]


def _logs_linked(root, md, text):
    """(path, anchor) of every text file under docs/results/ that `text` links."""
    results = (root / "docs" / "results").resolve()
    found = []
    for _, target in LINK_PARTS.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        path_part, _, frag = target.partition("#")
        dest = (md if not path_part else md.parent / path_part).resolve()
        if (dest.is_file() and results in dest.parents
                and dest.suffix in (".md", ".txt", ".csv", ".dat", ".json", ".jsonl")):
            found.append((dest, frag or None))
    return found


def _units(lines):
    """The sections of a page, each a list of units under one heading; a unit is a sentence of a
    paragraph or list item, or a table row: (kind "sentence" or "row", [(line number, char)])."""
    sections, units, paragraph, fence = [], [], [], False

    def flush():
        if paragraph:
            joined, starts = "", []
            for number, text in paragraph:
                starts.append((len(joined), number))
                joined += text.strip() + " "
            for start, body in _split_sentences(joined):
                units.append(("sentence",
                              [(_line_at(starts, start + i), ch) for i, ch in enumerate(body)]))
            paragraph.clear()

    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            flush()
            fence = not fence
            continue
        if fence:
            continue
        if HEADING.match(line):
            flush()
            sections.append(units)
            units = []
        elif line.startswith("|"):
            flush()
            if not re.match(r"^\|[\s:|-]+\|?\s*$", line):  # not the |---| rule
                units.append(("row", [(number, ch) for ch in line]))
        elif units and units[-1][0] == "row":
            units.append(("end of table", []))
        elif not line.strip():
            flush()
        else:
            if LIST_ITEM.match(line):
                flush()
                line = LIST_ITEM.sub(lambda m: " " * len(m.group(0)), line, count=1)
            paragraph.append((number, line))
    flush()
    sections.append(units)
    return sections


def _line_at(starts, offset):
    number = starts[0][1]
    for start, n in starts:
        if start <= offset:
            number = n
    return number


def _split_sentences(text):
    out, start = [], 0
    for m in SENTENCE_END.finditer(text):
        out.append((start, text[start:m.start()]))
        start = m.end()
    out.append((start, text[start:]))
    return out


def check_figures(root, md):
    """A guide's figures are its logs': under a heading that links a log under docs/results/,
    every number of a sentence that links a log, every number of a table whose rows or caption
    (the paragraph before it) link a log, and every measured
    figure (a number with a unit: 0.26x, 86.8%, 44.1 s, 325 steps) of any other sentence occurs
    in one of the logs linked under that heading (a Markdown log linked with an anchor: in that
    section of it)."""
    problems = []
    name = md.relative_to(root)
    exceptions = FIGURE_EXCEPTIONS.get(str(name), set())
    for units in _units(md.read_text(encoding="utf-8").splitlines()):
        texts = ["".join(ch for _, ch in chars) for _, chars in units]
        linked = [_logs_linked(root, md, text) for text in texts]
        logs = []
        for found in linked:
            logs += [t for t in found if t not in logs]
        if not logs:
            continue
        known = set().union(*(log_figures(root, t) for t in logs))
        shown = ", ".join(sorted({str(p.relative_to((root / "docs" / "results").resolve()))
                                  + (f"#{f}" if f else "") for p, f in logs}))
        # A table is its log's when a row or the paragraph before it (its caption) links one.
        log_table, table_start = [False] * len(units), None
        for k, (kind, _) in enumerate(units + [("end of table", [])]):
            if kind == "row" and table_start is None:
                table_start = k
            elif kind != "row" and table_start is not None:
                caption = table_start - 1
                while caption >= 0 and units[caption][0] == "sentence" and not linked[caption] \
                        and units[caption][1][-1][0] + 1 == units[caption + 1][1][0][0]:
                    caption -= 1  # the caption's earlier sentences, up to one that links
                owned = any(linked[table_start:k]) or (
                    caption >= 0 and units[caption][0] == "sentence" and bool(linked[caption]))
                for r in range(table_start, k):
                    log_table[r] = owned
                table_start = None
        for (kind, chars), text, own, table in zip(units, texts, linked, log_table):
            if not chars:
                continue
            every = table or bool(own)
            for offset, figure, measured in _figures_of(text):
                if not (every or measured):
                    continue
                if figure_key(figure) in known or figure in exceptions:
                    continue
                problems.append(f"{name}:{chars[offset][0]}: '{figure}' is in none of the logs "
                                f"linked under its heading ({shown})")
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
        broken += check_figures(root, guide)
    for design in sorted((root / "docs" / "design").glob("*.md")):
        broken += check_guide(root, design, design=True)
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
