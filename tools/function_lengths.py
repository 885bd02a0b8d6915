#!/usr/bin/env python3
"""Lists the C++ function bodies under the given folders with their length in lines.

A small brace matcher, not a parser: comments, string and character literals (raw strings
too) are blanked first, then every `{` whose preceding text ends like a function signature
(`) {`, `) const {`, `) && {`, `) noexcept {`, `) -> T {`, a constructor's initialiser list) at
namespace or class scope opens a function whose length runs to its matching `}`. Lambdas and
blocks inside a function count towards that function. Good enough for the limit it checks
(docs/design.md "Function length"); it reads every file of src/ in well under a second.

Usage: tools/function_lengths.py [--max N] [--warn N] [--list N] [--check] DIR...
Exit 1 if a function is longer than --max, or longer than --warn without a one-line reason
comment (`// long: ...`) on the line above its signature. --check (what ctest runs, test
`function_lengths`) also says so in one line when every function is within the limits.
"""
import argparse
import os
import re
import sys

SIGNATURE_END = re.compile(
    r"\)\s*(const\s*)?(&&?\s*)?(noexcept(\s*\([^()]*\))?\s*)?(override\s*|final\s*)*(->\s*[\w:<>,\s*&]+)?\s*$")
INITIALISER_LIST = re.compile(r"\)\s*:\s*[\w:]+\s*[({]")
SCOPE_KEYWORDS = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;{}()]*$")


def blank_literals(text):
    """Replaces comments and literals by spaces, keeping newlines, so offsets keep their lines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c); i += 1; continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j])); i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" "); i += 1; continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c); i = j
        else:
            out.append(c); i += 1
    return "".join(out)


def functions_in(path):
    text = blank_literals(open(path, encoding="utf-8", errors="replace").read())
    lines = text.split("\n")
    results = []
    # stack of (kind, start_line, name): kind is 'scope' (namespace/class) or 'function' or 'block'
    stack = []
    line = 1
    segment_start = 0
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch == "{":
            before = text[segment_start:i]
            in_function = any(kind != "scope" for kind, _, _ in stack)
            if in_function:
                kind = "block"
            elif SCOPE_KEYWORDS.search(before) or before.rstrip().endswith("extern \"C\""):
                kind = "scope"
            elif SIGNATURE_END.search(before) or INITIALISER_LIST.search(before):
                kind = "function"
            else:
                kind = "block"  # an initialiser or an aggregate at namespace scope
            name = " ".join(before.split())[-120:]
            stack.append((kind, line, name))
            segment_start = i + 1
        elif ch == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    results.append((line - start + 1, start, name))
            segment_start = i + 1
        elif ch == ";":
            segment_start = i + 1
    return results, lines


def has_reason(path, start):
    raw = open(path, encoding="utf-8", errors="replace").read().split("\n")
    # the signature may span lines: look a few lines above the body's opening line
    for k in range(max(0, start - 8), start):
        if "// long:" in raw[k]:
            return True
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--max", type=int, default=100)
    parser.add_argument("--warn", type=int, default=80)
    parser.add_argument("--list", type=int, default=0, help="print the N longest functions")
    parser.add_argument("--check", action="store_true", help="print one line when every function is within the limits")
    args = parser.parse_args()
    found = []
    for d in args.dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith((".cc", ".h", ".cpp")):
                    path = os.path.join(root, f)
                    fns, _ = functions_in(path)
                    found += [(n, path, start, name) for n, start, name in fns]
    found.sort(reverse=True)
    for n, path, start, name in found[: args.list]:
        print(f"{n:5d} {path}:{start} {name[-70:]}")
    bad = [(n, p, s) for n, p, s, _ in found if n > args.max or (n > args.warn and not has_reason(p, s))]
    for n, p, s in bad:
        print(f"{p}:{s}: function of {n} lines (limit {args.max}; over {args.warn} needs a '// long: why' line above it)")
    if args.check and not bad:
        longest = found[0][0] if found else 0
        print(f"function lengths: {len(found)} functions, the longest {longest} lines; none over {args.max}, "
              f"none over {args.warn} without a '// long:' reason")
    if args.check and not found:
        print("function lengths: no function found (wrong folder?)")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
