"""Runs the examples of README.md and docs/*.md and compares their shown output (issue 23).

The convention (docs/README-style summary in docs/cli.md, "Examples in these docs"):

- A runnable example is a fenced block whose info string is `console`. Each line starting
  with `$ ` is a command, run by bash in the scratch folder (a line ending in `\\` continues
  on the next line). The lines up to the next `$ ` line are its shown output: what the
  command writes to stderr, then what it writes to stdout (trailing spaces and trailing blank
  lines ignored). A command whose shown output contains `toposched: error:` must fail (exit
  1 or 2); every other command must exit 0.
- In shown output, a line that is exactly `...` stands for any number of lines (none
  included), and `...` inside a line for any text on that line. Everything else is compared
  exactly, so tables and JSON keys must match character for character.
- A console block that cannot run here (a live Slurm or Kubernetes cluster, `serve`, which
  runs until stopped, `make`) is preceded by `<!-- doc-test: skip REASON -->`; the reason is
  required. Any other fenced block holding a `toposched` command line must carry the same
  marker, except `text` blocks, which hold synopses (a `toposched` line with a placeholder:
  `[...]`, `|` or an upper-case word such as SPEC). An indented code block may not hold a
  `toposched` command at all: examples are fenced, so that they are found.
- The blocks of one file run in order in one scratch folder, new for each file, that holds a
  copy of the repository's `examples/` and `tests/data/`, so every path reads as it does from
  the root of a fresh clone. `toposched` is the binary under test, first on PATH.

`update_file` rewrites the shown outputs from the program's (scripts/doc-outputs --update),
keeping the `...` placeholders where the new output still fits them.
"""

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile

SOURCE_DIR = os.environ.get("TOPOSCHED_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SKIP_MARKER = re.compile(r"^<!--\s*doc-test:\s*skip\b\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
COMMAND_LINE = re.compile(r"^\s*(\$\s+)?toposched(\s|$)")
SYNOPSIS_HINT = re.compile(r"\[|\||\b[A-Z][A-Z_]{1,}\b")
ELLIPSIS = "..."
COMMAND_TIMEOUT_S = 300
SEEDED = ("examples", os.path.join("tests", "data"))


def documented_files(source_dir=SOURCE_DIR):
    docs = os.path.join(source_dir, "docs")
    return [os.path.join(source_dir, "README.md"), os.path.join(source_dir, "examples", "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


@dataclasses.dataclass
class Command:
    text: str           # the command as bash gets it (continuation lines included)
    first_line: int     # 0-based line of its `$ ` in the file
    output_start: int   # first line of its shown output
    output_end: int     # one past the last line of its shown output
    shown: list         # the shown output lines


@dataclasses.dataclass
class Block:
    info: str
    start: int          # line of the opening fence
    end: int            # line of the closing fence
    skip_reason: str    # None when the block runs
    commands: list


def parse(path):
    """(blocks, problems): every fenced block that holds a toposched command, and the places
    that break the convention."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, problems = [], []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].startswith(("    ", "\t")) and COMMAND_LINE.match(lines[i]) and not _in_list_item(lines, i):
                problems.append(f"{path}:{i + 1}: a toposched command in an indented code block: "
                                "put examples in a ```console block (or mark a ```sh block with "
                                "<!-- doc-test: skip REASON -->)")
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3)
        close = i + 1
        while close < len(lines) and not lines[close].strip().startswith(fence[0] * len(fence)):
            close += 1
        body = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[i + 1:close]]
        marker = _marker_before(lines, i)
        holds_command = any(COMMAND_LINE.match(l) for l in body)
        if info == "console":
            if marker is not None and not marker:
                problems.append(f"{path}:{i + 1}: a skip marker needs a reason: <!-- doc-test: skip REASON -->")
            commands = _commands(body, i + 1)
            if not commands:
                problems.append(f"{path}:{i + 1}: a console block without a `$ ` command line")
            blocks.append(Block(info, i, close, marker, commands))
        elif holds_command:
            if info == "text":
                for k, l in enumerate(body):
                    if COMMAND_LINE.match(l) and (l.lstrip().startswith("$") or not SYNOPSIS_HINT.search(l)):
                        problems.append(f"{path}:{i + 2 + k}: a command in a text block: text blocks hold "
                                        "synopses; put examples in a ```console block")
            elif not marker:
                problems.append(f"{path}:{i + 1}: a ```{info or '(no language)'} block with a toposched "
                                "command: use ```console, or mark it <!-- doc-test: skip REASON -->")
        i = close + 1
    return blocks, problems


def _in_list_item(lines, i):
    """An indented line that continues a list item's paragraph is prose, not code."""
    k = i - 1
    while k >= 0 and lines[k].strip():
        if re.match(r"^\s*([-*+]|\d+\.)\s", lines[k]):
            return True
        k -= 1
    return False


def _marker_before(lines, fence_line):
    k = fence_line - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    if k < 0:
        return None
    m = SKIP_MARKER.match(lines[k].strip())
    return m.group(1) if m else None


def _commands(body, first):
    commands, k = [], 0
    while k < len(body):
        if not body[k].startswith("$ "):
            k += 1
            continue
        start = k
        text = [body[k][2:]]
        while text[-1].endswith("\\") and k + 1 < len(body):
            k += 1
            text.append(body[k])
        k += 1
        out_start = k
        while k < len(body) and not body[k].startswith("$ "):
            k += 1
        commands.append(Command("\n".join(text), first + start, first + out_start, first + k, body[out_start:k]))
    return commands


# --- comparison -------------------------------------------------------------------------

def _normalise(lines):
    lines = [l.rstrip() for l in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _line_matches(pattern, line):
    if ELLIPSIS not in pattern:
        return pattern == line
    regex = ".*".join(re.escape(p) for p in pattern.split(ELLIPSIS))
    return re.fullmatch(regex, line) is not None


def output_matches(shown, actual):
    shown, actual = _normalise(shown), _normalise(actual)
    reachable = {0}  # lines of `actual` the shown lines so far can end before
    for pattern in shown:
        if not reachable:
            return False
        if pattern.strip() == ELLIPSIS:
            reachable = set(range(min(reachable), len(actual) + 1))
        else:
            reachable = {j + 1 for j in reachable if j < len(actual) and _line_matches(pattern, actual[j])}
    return len(actual) in reachable


def refreshed_output(shown, actual):
    """The shown output rewritten from `actual`, keeping its `...` lines and the inline `...`
    of lines that still fit."""
    shown, actual = _normalise(shown), _normalise(actual)
    if output_matches(shown, actual):
        return shown
    segments, current = [], []
    for line in shown:
        if line.strip() == ELLIPSIS:
            segments.append(current)
            current = []
        else:
            current.append(line)
    segments.append(current)
    if len(segments) == 1 or sum(len(s) for s in segments) >= len(actual):
        return _keep_fitting(shown, actual) if len(shown) == len(actual) else actual
    head, tail = segments[0], segments[-1]
    result = _keep_fitting(head, actual[:len(head)])
    position = len(head)
    tail_start = len(actual) - len(tail)
    for middle in segments[1:-1]:
        result.append(ELLIPSIS)
        if not middle:
            continue
        start = max(range(position, max(position, tail_start - len(middle)) + 1),
                    key=lambda s: _similarity(middle, actual[s:s + len(middle)]))
        result += _keep_fitting(middle, actual[start:start + len(middle)])
        position = start + len(middle)
    result.append(ELLIPSIS)
    result += _keep_fitting(tail, actual[tail_start:]) if tail else []
    return result


def _keep_fitting(patterns, lines):
    return [p if _line_matches(p, l) else l for p, l in zip(patterns, lines)] + lines[len(patterns):]


def _similarity(patterns, lines):
    score = 0
    for p, l in zip(patterns, lines):
        common = os.path.commonprefix([p, l])
        score += len(common) + (1000 if _line_matches(p, l) else 0)
    return score


# --- running ----------------------------------------------------------------------------

def make_scratch(binary, source_dir=SOURCE_DIR):
    scratch = tempfile.mkdtemp(prefix="toposched-docs-")
    for rel in SEEDED:
        shutil.copytree(os.path.join(source_dir, rel), os.path.join(scratch, rel), symlinks=True)
    bin_dir = os.path.join(scratch, ".bin")
    os.mkdir(bin_dir)
    os.symlink(os.path.abspath(binary), os.path.join(bin_dir, "toposched"))
    return scratch


def run_command(command, scratch):
    env = dict(os.environ, PATH=os.path.join(scratch, ".bin") + os.pathsep + os.environ.get("PATH", ""),
               LC_ALL="C.UTF-8", TZ="UTC", HOME=scratch)
    r = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=scratch, env=env, capture_output=True,
                       encoding="utf-8", errors="backslashreplace", timeout=COMMAND_TIMEOUT_S)
    return r.returncode, (r.stderr + r.stdout).split("\n")


def check_command(command, code, actual):
    """A description of what is wrong, or None."""
    expects_error = any("toposched: error:" in l for l in command.shown)
    if expects_error and code not in (1, 2):
        return f"exit status {code}, but the shown output is an error (expected 1 or 2)"
    if not expects_error and code != 0:
        return f"exit status {code}:\n" + "\n".join(_normalise(actual)[-20:])
    if not output_matches(command.shown, actual):
        return "shown output differs from the program's:\n" + _diff(command.shown, actual)
    return None


def _diff(shown, actual):
    import difflib
    return "\n".join(difflib.unified_diff(_normalise(shown), _normalise(actual), "shown", "program", lineterm="", n=2))


def run_file(path, binary, update=False):
    """(failures, changed): failures as text; with update, the file is rewritten from the
    program's outputs and `changed` counts the outputs rewritten."""
    blocks, problems = parse(path)
    failures = list(problems)
    rel = os.path.relpath(path, SOURCE_DIR)
    replacements = []
    scratch = make_scratch(binary)
    try:
        for block in blocks:
            if block.skip_reason:
                continue
            for command in block.commands:
                code, actual = run_command(command.text, scratch)
                problem = check_command(command, code, actual)
                if problem and update and not problem.startswith("exit status"):
                    replacements.append((command, refreshed_output(command.shown, actual)))
                elif problem:
                    failures.append(f"{rel}:{command.first_line + 1}: $ {command.text}\n{problem}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if replacements:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for command, new in sorted(replacements, key=lambda r: -r[0].output_start):
            indent = re.match(r"^\s*", lines[command.first_line]).group(0)
            lines[command.output_start:command.output_end] = [indent + l if l else l for l in new]
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
    return failures, len(replacements)
