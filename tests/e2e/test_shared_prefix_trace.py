"""scripts/shared-prefix-trace writes llm-d's shared-prefix shape in Mooncake's JSONL, the
committed traces are what it writes, and `toposched route` reads them (issue 33, acceptance 4)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("TOPOSCHED_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "scripts", "shared-prefix-trace")
DATA = os.path.join(ROOT, "tests", "data", "traces", "llm-d")
BINARY = os.environ.get("TOPOSCHED", os.path.join(ROOT, "build", "debug", "toposched"))


def generate(out, *args):
    return subprocess.run([sys.executable, SCRIPT, "--out", out, *args], check=True, capture_output=True, text=True).stdout


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class SharedPrefixTrace(unittest.TestCase):
    def test_committed_traces_are_what_the_script_writes(self):
        with tempfile.TemporaryDirectory() as tmp:
            for share, name in (("0.64", "shared_prefix_64.jsonl"), ("1.37", "shared_prefix_137.jsonl")):
                out = os.path.join(tmp, name)
                generate(out, "--kv-share", share)
                with open(out, "rb") as a, open(os.path.join(DATA, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)

    def test_shape_and_sizing(self):
        r = rows(os.path.join(DATA, "shared_prefix_64.jsonl"))
        prompts = {tuple(x["hash_ids"]) for x in r}
        systems = {p[:11] for p in prompts}
        self.assertEqual(len(systems), 138)  # 0.64 x 6664 / 31 blocks per group
        self.assertEqual(len(prompts), 138 * 5)
        self.assertEqual(len(r), 4 * 138 * 5)  # every prompt sent 4 times
        for x in r:
            self.assertEqual((x["input_length"], x["output_length"], len(x["hash_ids"])), (7200, 1000, 15))
        # Request i sends prompt i mod count, as inference-perf cycles its shuffled prompts.
        self.assertEqual(r[0]["hash_ids"], r[690]["hash_ids"])
        self.assertNotEqual(r[0]["hash_ids"], r[1]["hash_ids"])
        times = [x["timestamp"] for x in r]
        self.assertEqual(times, sorted(times))
        self.assertEqual(len({tuple(x["hash_ids"][:11]) for x in rows(os.path.join(DATA, "shared_prefix_137.jsonl"))}), 295)

    def test_bad_arguments_are_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.run([sys.executable, SCRIPT, "--out", os.path.join(tmp, "t"), "--rate", "0"], capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("--rate", p.stderr)

    def test_route_reads_it_and_kv_finds_the_shared_prefixes(self):
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([BINARY, "route", "--cluster", "preset:dgx-h100?nodes=2", "--trace", os.path.join(DATA, "shared_prefix_64.jsonl"),
                            "--workers", "8", "--policies", "round-robin,kv", "--report", out, "--quiet"], check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "report.json")) as f:
                rep = json.load(f)
        bound = rep["trace"]["token_hit_upper_bound"]
        self.assertGreater(bound, 0.85)  # 3 of 4 passes are repeats of whole prompts
        self.assertGreaterEqual(rep["policies"]["kv"]["token_hit_rate"], 0.9 * bound)
        self.assertLess(rep["policies"]["round-robin"]["token_hit_rate"], 0.5 * bound)


if __name__ == "__main__":
    unittest.main()
