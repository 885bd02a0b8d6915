#!/usr/bin/env python3
"""Runs clang's thread-safety analysis over src/ (issue 28, acceptance 5).

The annotations (src/topology/thread_annotations.h: GUARDED_BY, REQUIRES, ...) expand to
nothing under g++, which builds and tests everything; this check gives them their teeth
without a second full build. Every translation unit under src/ that includes the
annotations header, directly or through other headers of src/, is compiled by clang with
-fsyntax-only (parse and analyse, no code generated) and

    -Wthread-safety -Wthread-safety-beta -Werror

and with the include paths, defines and language standard the build gives it, taken from
the build's compile_commands.json (g++-only flags and code-generation flags are dropped). A
translation unit that cannot include the header holds nothing to analyse.

Then the negative control: tests/data/thread_safety/violations.cc, compiled the same way,
must fail with an error on every line marked `expect: TEXT` (clang's message containing
TEXT) and on no other line. So the check cannot pass because nothing was analysed.

Usage: tools/thread_safety.py --compile-commands BUILD/compile_commands.json
           [--clang clang++-14] [--jobs N] [--source-dir DIR]
Exit 0 when src/ is clean and the control fails as expected; 1 otherwise (each finding and
the clang command are printed).
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

ANNOTATIONS_HEADER = "topology/thread_annotations.h"
CONTROL = os.path.join("tests", "data", "thread_safety", "violations.cc")
WARNINGS = ["-Wthread-safety", "-Wthread-safety-beta", "-Werror"]
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
DIAGNOSTIC = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):\d+: (?P<kind>error|warning): (?P<message>.*)$",
                        re.MULTILINE)


def quoted_includes(path, src_dir):
    """The files of src/ that `path` includes with #include "...", resolved as the build does
    (against src/, then the including file's folder)."""
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return []
    found = []
    for name in INCLUDE.findall(text):
        for base in (src_dir, os.path.dirname(path)):
            candidate = os.path.normpath(os.path.join(base, name))
            if os.path.isfile(candidate):
                found.append(candidate)
                break
    return found


def includes_annotations(path, src_dir, memo):
    """True when `path` includes the annotations header through any chain of src/ headers."""
    target = os.path.normpath(os.path.join(src_dir, ANNOTATIONS_HEADER))
    seen, stack = set(), [path]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current == target:
            return True
        if current not in memo:
            memo[current] = quoted_includes(current, src_dir)
        stack.extend(memo[current])
    return False


def arguments_of(entry):
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def clang_flags(build_args):
    """The flags of a build command clang needs to parse the file as the build does: include
    paths, defines and the language standard (C++23 is spelled c++2b by clang 14). Warnings,
    sanitizers, optimisation, debug info and outputs do not change what the analysis sees."""
    kept = []
    args = iter(build_args[1:])
    for a in args:
        if a in ("-I", "-isystem", "-iquote", "-D", "-U", "-include"):
            kept += [a, next(args, "")]
        elif a.startswith(("-I", "-isystem", "-iquote", "-D", "-U")):
            kept.append(a)
        elif a.startswith("-std="):
            kept.append(a.replace("c++23", "c++2b").replace("gnu++23", "gnu++2b"))
    return kept


def analyse(clang, flags, path, directory):
    command = [clang, "-fsyntax-only", *WARNINGS, *flags, path]
    run = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    return command, run.returncode, run.stdout + run.stderr


def translation_units(compile_commands, src_dir):
    """(file, clang flags, directory) of every src/ file that includes the annotations header."""
    memo, units = {}, []
    for entry in compile_commands:
        path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
        if not path.startswith(src_dir + os.sep) or not includes_annotations(path, src_dir, memo):
            continue
        units.append((path, clang_flags(arguments_of(entry)), entry["directory"]))
    return units


def check_sources(clang, units, jobs):
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = pool.map(lambda u: analyse(clang, u[1], u[0], u[2]), units)
        for command, rc, output in runs:
            if rc != 0 or DIAGNOSTIC.search(output):
                failures.append(f"$ {shlex.join(command)}\n{output}")
    return failures


def expected_errors(path):
    """{line: text} for every line of the control marked `expect: TEXT`."""
    expected = {}
    for number, line in enumerate(open(path, encoding="utf-8"), start=1):
        if "// expect: " in line:
            expected[number] = line.split("// expect: ", 1)[1].strip()
    return expected


def check_control(clang, control, flags, directory):
    """Problems with the negative control: a marked line without its error, an error on an
    unmarked line, or a control that compiled cleanly."""
    command, rc, output = analyse(clang, flags, control, directory)
    expected = expected_errors(control)
    reported = {}
    for d in DIAGNOSTIC.finditer(output):
        if os.path.normpath(os.path.join(directory, d["file"])) == control:
            reported.setdefault(int(d["line"]), []).append(d["kind"] + ": " + d["message"])
    problems = []
    if not expected:
        problems.append(f"{control}: no line is marked `// expect: ...`")
    if rc == 0:
        problems.append(f"{control}: compiled without an error; the analysis is not running")
    for line, text in sorted(expected.items()):
        if not any(m.startswith("error: ") and text in m for m in reported.get(line, [])):
            problems.append(f"{control}:{line}: expected an error containing '{text}', got {reported.get(line, [])}")
    for line, messages in sorted(reported.items()):
        if line not in expected:
            problems.append(f"{control}:{line}: unexpected {messages}")
    if problems:
        problems.append(f"$ {shlex.join(command)}\n{output}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compile-commands", required=True)
    parser.add_argument("--clang", default="clang++-14")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    a = parser.parse_args()
    if not shutil.which(a.clang):
        sys.exit(f"thread_safety: {a.clang} not found (scripts/install-deps installs clang-14)")
    started = time.monotonic()
    source_dir = os.path.abspath(a.source_dir)
    src_dir = os.path.join(source_dir, "src")
    with open(a.compile_commands, encoding="utf-8") as f:
        commands = json.load(f)
    units = translation_units(commands, src_dir)
    if not units:
        sys.exit(f"thread_safety: no translation unit of {src_dir} in {a.compile_commands} includes "
                 f"{ANNOTATIONS_HEADER}; nothing would be analysed")
    failures = check_sources(a.clang, units, a.jobs)
    # The control is compiled with the flags of a source that uses the wrappers.
    failures += check_control(a.clang, os.path.join(source_dir, CONTROL), units[0][1], units[0][2])
    elapsed = time.monotonic() - started
    if failures:
        print("\n\n".join(failures))
        print(f"thread_safety: FAILED ({len(units)} translation units, {elapsed:.0f} s)")
        return 1
    print(f"thread_safety: {len(units)} translation units of src/ clean under {' '.join(WARNINGS)}; "
          f"the control's {len(expected_errors(os.path.join(source_dir, CONTROL)))} violations reported "
          f"({elapsed:.0f} s, {a.jobs} jobs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
