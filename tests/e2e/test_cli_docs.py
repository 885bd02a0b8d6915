"""docs/cli.md cannot drift from the program's options (issue 23, acceptance 2).

The commands are listed from `toposched --help` (and, for a command with subcommands, from
its own `--help`), so a new command is checked as soon as it exists. For each command:

- docs/cli.md has a synopsis for it: a line `toposched COMMAND ...` in a ```text block,
  continued by the indented lines under it;
- the options in its synopses, short and long, are exactly those of its `--help` (less
  `-h, --help`): an option in `--help` but not in docs/cli.md fails, and so does the reverse;
- docs/cli.md shows its whole `--help` in a `$ toposched COMMAND --help` example, which
  tests/e2e/test_docs.py compares with the program's (so defaults and option texts in the
  docs are the program's own);
- a short option means the same long option in every command, `-q` is `--quiet` wherever it
  exists, and the table "Short options" of docs/cli.md lists every short option the
  program has, with its long name.
"""

import functools
import os
import re
import subprocess
import unittest

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
SOURCE_DIR = os.environ.get("TOPOSCHED_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI_MD = os.path.join(SOURCE_DIR, "docs", "cli.md")
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
# One letter, one meaning; `-p` names the policy of `place` and the policies of the simulators.
SAME_MEANING = {"--policies": "--policy"}


@functools.lru_cache(maxsize=None)
def help_text(path):
    r = subprocess.run([TOPOSCHED, *path, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (path, r.stderr)
    return r.stdout


def section(text, title):
    m = re.search(r"^" + re.escape(title) + r":?\s*$(.*?)(?=^\S|\Z)", text, re.M | re.S)
    return m.group(1) if m else ""


def subcommands(path=()):
    names = [line.split()[0] for line in section(help_text(tuple(path)), "Subcommands").splitlines() if line.strip()]
    return names


def all_commands():
    commands = []
    for name in subcommands():
        nested = subcommands((name,))
        commands += [(name, sub) for sub in nested] if nested else [(name,)]
    return commands


def help_options(path):
    """{long name: short name or None} of a command's --help, less -h/--help."""
    options = {}
    for line in section(help_text(tuple(path)), "Options").splitlines():
        m = re.match(r"^\s{2}((?:-[A-Za-z],)?--[\w-]+)", line)
        if not m:
            continue
        names = m.group(1).split(",")
        long_name = names[-1]
        if long_name != "--help":
            options[long_name] = names[0] if len(names) == 2 else None
    return options


def synopses(path=CLI_MD):
    """{command words: [synopsis text]} from the ```text blocks of docs/cli.md."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found, in_text, current = {}, False, None
    for line in lines:
        if line.startswith("```"):
            in_text = line.strip() == "```text"
            current = None
            continue
        if not in_text:
            continue
        if line.startswith("toposched "):
            words = []
            for w in line.split()[1:]:
                if not re.fullmatch(r"[a-z][a-z-]*", w):
                    break
                words.append(w)
            current = found.setdefault(tuple(words), [])
            current.append(line)
        elif line.startswith(" ") and current is not None:
            current[-1] += "\n" + line
    return found


def documented_options(texts):
    options = set()
    for text in texts:
        options |= set(OPTION.findall(text))
    return options


class CliDocsMatchHelp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.commands = all_commands()
        cls.found = synopses()
        with open(CLI_MD, encoding="utf-8") as f:
            cls.cli_md = f.read()

    def test_commands_are_listed(self):
        # The listing itself works: the known commands are there, nested ones included.
        for command in [("presets",), ("place",), ("serve",), ("route",), ("slurm", "submit"),
                        ("slurm", "job-submit-lua"), ("state", "import"), ("state", "export")]:
            self.assertIn(command, self.commands)

    def test_every_option_documented_and_nothing_else(self):
        for command in self.commands:
            name = " ".join(command)
            with self.subTest(command=name):
                texts = self.found.get(command, [])
                self.assertTrue(texts, f"docs/cli.md has no synopsis for '{name}': add a ```text block "
                                       f"with 'toposched {name} ...' under its section")
                in_help = set()
                for long_name, short in help_options(command).items():
                    in_help.add(long_name)
                    if short:
                        in_help.add(short)
                in_docs = documented_options(texts)
                self.assertEqual({"in --help, not in docs/cli.md": sorted(in_help - in_docs),
                                  "in docs/cli.md, not in --help": sorted(in_docs - in_help)},
                                 {"in --help, not in docs/cli.md": [], "in docs/cli.md, not in --help": []},
                                 f"options of 'toposched {name}': its --help and its docs/cli.md synopsis differ")

    def test_every_help_is_shown(self):
        for command in self.commands:
            name = " ".join(command)
            with self.subTest(command=name):
                self.assertRegex(self.cli_md, r"(?m)^\$ toposched " + re.escape(name) + r" --help$",
                                 f"docs/cli.md shows no '$ toposched {name} --help' example")

    def test_short_options_mean_one_thing(self):
        meaning = {}
        for command in self.commands:
            for long_name, short in help_options(command).items():
                if not short:
                    continue
                canonical = SAME_MEANING.get(long_name, long_name)
                meaning.setdefault(short, {}).setdefault(canonical, []).append(" ".join(command))
        for short, longs in meaning.items():
            with self.subTest(short=short):
                self.assertEqual(len(longs), 1, f"{short} means {longs}")
        self.assertEqual(list(meaning.get("-q", {"--quiet": []})), ["--quiet"])
        table = section_of_markdown(self.cli_md, "### Short options")
        rows = {}
        for line in table.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and cells[0].startswith("`-"):
                shorts = re.findall(r"`(-[A-Za-z])`", cells[0])
                longs = re.findall(r"`(--[\w-]+)`", cells[1])
                for s, l in zip(shorts, longs):
                    rows[s] = l
        program = {s: next(iter(l)) for s, l in meaning.items()}
        self.assertEqual(rows, program, "the 'Short options' table of docs/cli.md differs from the program's")


def section_of_markdown(text, heading):
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return text[start:end if end != -1 else len(text)]


if __name__ == "__main__":
    unittest.main()
