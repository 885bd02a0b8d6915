"""Code-level boundaries of the one engine (issue #28, acceptance 5), checked on the source:

- no file outside src/placement/ calls a placement policy's select();
- no file outside src/placement/ changes an AllocationState (allocate/release) itself;
- no dynamic_cast on a store.

The paths that still do (listed below with why) are the rest of issue #28's work: the test
is a ratchet. A new file that crosses a boundary fails it, and so does a listed file that no
longer does (then take it off the list), so the list can only shrink."""
import os
import re
import unittest

from toposched_cli import SOURCE_DIR

SRC = os.path.join(SOURCE_DIR, "src")

SELECT = re.compile(r"(\.|->)select\(")
# allocate/release called on something that is not the engine, a scheduler or a placer
# (their release() is a command, not a state change).
STATE_CHANGE = re.compile(r"\b(state_?|what_if|out\.state|live|fresh)\s*(\.|->)\s*(allocate|release)\(")
STORE_CAST = re.compile(r"dynamic_cast<[^>]*Store\b")

KNOWN = {
    "select": set(),
    # The simulator's placer changes its states through placement/ledger.h (apply of
    # Mutation records), like every other front end through the engine.
    "state_change": set(),
    "store_cast": set(),
}


def sources():
    for root, _, files in os.walk(SRC):
        for name in files:
            if name.endswith((".cc", ".h")):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    yield os.path.relpath(path, SRC), f.read()


def crossing(pattern, outside_placement=True):
    found = set()
    for rel, text in sources():
        if outside_placement and rel.startswith("placement/"):
            continue
        # Comments do not call anything.
        code = "\n".join(line.split("//", 1)[0] for line in text.splitlines())
        if pattern.search(code):
            found.add(rel)
    return found


class EngineBoundaries(unittest.TestCase):
    def check(self, kind, pattern, outside_placement=True):
        found = crossing(pattern, outside_placement)
        self.assertEqual(found - KNOWN[kind], set(), f"new {kind} outside the engine: go through place_job / Engine::apply")
        self.assertEqual(KNOWN[kind] - found, set(), f"these no longer cross ({kind}): take them off KNOWN")

    def test_only_placement_calls_a_policys_select(self):
        self.check("select", SELECT)

    def test_only_placement_changes_an_allocation_state(self):
        self.check("state_change", STATE_CHANGE)

    def test_no_dynamic_cast_on_stores(self):
        self.check("store_cast", STORE_CAST, outside_placement=False)

    def test_the_patterns_find_what_they_look_for(self):
        # The check itself: a call of each kind is found, in a file of each layer.
        self.assertTrue(SELECT.search("auto g = policy->select(state, r, mask);"))
        self.assertTrue(STATE_CHANGE.search("(void)state_.release(id);"))
        self.assertTrue(STORE_CAST.search("dynamic_cast<EtcdStore*>(&s)"))
        self.assertFalse(STATE_CHANGE.search("scheduler.release(id)"))
        self.assertIn("placement/engine.cc", crossing(re.compile(r"apply_locked\("), outside_placement=False))


if __name__ == "__main__":
    unittest.main()
