#!/usr/bin/env python3
"""Which integration tests need the default features (scripts/test.sh).

scripts/test.sh runs every test once without default features (feature `cli`: the headless
core and its command line), then, with default features, only what those features add, so no
end-to-end check runs twice in two builds. This script reads Cargo.toml and tests/*.rs and
sorts the test targets:

  whole    the target exists only with default features (its `required-features`, or a
           file-level `#![cfg(...)]`), or its shared tests change behaviour with them
           (`cfg!(feature = ...)` in a test body): every test of it runs with default features;
  partial  some of its tests or modules are `#[cfg(...)]` on a default-only feature: run with
           default features only the tests that the headless build does not have
           (`cargo test -- --list` in both builds, compared);
  (other)  nothing in it depends on a default-only feature: it ran in the headless build.

Usage: feature_tests.py whole|partial  (prints the target names, one a line)
"""

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADLESS_FEATURES = ["cli"]  # what scripts/test.sh's first test run enables


def closure(features, table):
    """The features `features` turn on, transitively (dependencies' features left out)."""
    out, todo = set(), list(features)
    while todo:
        name = todo.pop()
        if name in out or name not in table:
            continue
        out.add(name)
        todo.extend(f for f in table[name] if "/" not in f and not f.startswith("dep:"))
    return out


def cfg_holds(expr, enabled):
    """Evaluates a cfg predicate of `feature = "..."`, `all`, `any` and `not` (anything else,
    e.g. `test` or `unix`, counts as true: both builds share it)."""
    tokens = re.findall(r'[A-Za-z_][\w-]*|"[^"]*"|[(),=]', expr)
    pos = 0

    def parse():
        nonlocal pos
        word = tokens[pos]
        pos += 1
        if word in ("all", "any", "not"):
            pos += 1  # (
            args = []
            while tokens[pos] != ")":
                args.append(parse())
                if tokens[pos] == ",":
                    pos += 1
            pos += 1  # )
            if word == "all":
                return all(args)
            if word == "any":
                return any(args)
            return not args[0]
        if pos < len(tokens) and tokens[pos] == "=":
            value = tokens[pos + 1].strip('"')
            pos += 2
            return value in enabled if word == "feature" else True
        return True

    return parse()


def main():
    manifest = tomllib.loads((ROOT / "Cargo.toml").read_text())
    table = manifest["features"]
    headless = closure(HEADLESS_FEATURES, table)
    default = closure(table["default"], table)
    only_default = default - headless
    mentions = re.compile(r'feature\s*=\s*"(%s)"' % "|".join(map(re.escape, only_default)))
    required = {t["name"]: t.get("required-features", []) for t in manifest.get("test", [])}

    # Shared test helpers whose code depends on a default-only feature make every target that
    # includes them partial.
    shared = {
        d.name
        for d in (ROOT / "tests").iterdir()
        if d.is_dir()
        and any(mentions.search(f.read_text()) for f in d.rglob("*.rs"))
    }

    whole, partial = [], []
    for path in sorted((ROOT / "tests").glob("*.rs")):
        name, text = path.stem, path.read_text()
        needs = set(required.get(name, []))
        if not needs <= default:
            continue  # never built by either run
        file_cfg = [m.group(1) for m in re.finditer(r"#!\[cfg\((.*)\)\]", text)]
        in_default = all(cfg_holds(c, default) for c in file_cfg)
        in_headless = needs <= headless and all(cfg_holds(c, headless) for c in file_cfg)
        if not in_default:
            continue
        if not in_headless or re.search(r"cfg!\([^;]*%s" % mentions.pattern, text):
            whole.append(name)
        elif mentions.search(text) or any(
            re.search(r"^\s*mod %s;" % re.escape(d), text, re.M) for d in shared
        ):
            partial.append(name)

    kind = sys.argv[1] if len(sys.argv) > 1 else ""
    if kind not in ("whole", "partial"):
        sys.exit(__doc__)
    print("\n".join(whole if kind == "whole" else partial))


if __name__ == "__main__":
    main()
