#!/usr/bin/env python3
"""Checks the library's floors: each folder includes only from itself and the floors below it.

  common/        types, status, logging, the clock (the public value types live in
                 common/include/arcreduce/)
  ops/           communicators and dense collectives             (uses common/)
  tensor_queue/  submitted tensors, messages, fusion             (uses common/)
  compressors/   compressors and error feedback                  (uses common/, ops/, tensor_queue/)
  runtime/       the public API, configuration, coordinator      (uses every floor)

A quoted include is resolved as the compiler does (the including file's folder, the repository
root, common/include, runtime/include; the generated build_config.h is a build fact every floor
may read), and the folder of the file it names must be one the includer's floor may use.

  check_layers.py REPO_ROOT
Prints each violation as FILE:LINE: INCLUDE (resolves into FOLDER) and exits 1 if there is any."""
import pathlib
import re
import sys

MAY_USE = {
    "common": {"common"},
    "ops": {"common", "ops"},
    "tensor_queue": {"common", "tensor_queue"},
    "compressors": {"common", "ops", "tensor_queue", "compressors"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GENERATED = {"arcreduce/build_config.h"}
SOURCES = (".h", ".cc", ".cu", ".cuh", ".inc")


def resolve(root, includer, name):
    for base in (includer.parent, root, root / "common/include", root / "runtime/include"):
        candidate = base / name
        if candidate.is_file():
            return candidate.resolve()
    return None


def main(root):
    violations, checked = [], 0
    for floor, allowed in MAY_USE.items():
        for path in sorted((root / floor).rglob("*")):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            checked += 1
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m or m.group(1) in GENERATED:
                    continue
                target = resolve(root, path, m.group(1))
                where = f"{path.relative_to(root)}:{number}: {m.group(1)}"
                if target is None:
                    violations.append(f"{where} (not found)")
                    continue
                folder = target.relative_to(root).parts[0]
                if folder not in allowed:
                    violations.append(f"{where} (resolves into {folder}/, which {floor}/ may "
                                      f"not use)")
    for v in violations:
        print(v)
    print(f"check_layers: {len(violations)} violation(s) in {checked} files" if violations
          else f"check_layers: {checked} files keep to their floors")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
