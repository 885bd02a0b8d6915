"""End-to-end: `toposched route` through the real binary (issue 15): the report.json
contract, byte-identical reruns, file:line errors for bad trace lines, --skip-bad-rows,
exit codes, and the report.html shell shared with `simulate`."""
import json
import os
import unittest

from toposched_cli import SOURCE_DIR, run, temp_dir

TRACE = os.path.join(SOURCE_DIR, "tests", "data", "traces", "mooncake", "conversation_trace.jsonl")
CLUSTER = "preset:dgx-h100?nodes=2"
CONTRACT = ["requests", "ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "tpot_mean_s", "tpot_p99_s", "throughput_tokens_per_s",
            "block_hit_rate", "token_hit_rate", "kv_bytes_moved", "energy_kwh"]


def head(tmp, n, extra=None, name="head.jsonl"):
    """The first n lines of the bundled trace, with `extra` lines inserted after line 2."""
    with open(TRACE) as f:
        lines = [next(f) for _ in range(n)]
    if extra:
        lines[2:2] = [l + "\n" for l in extra]
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.writelines(lines)
    return path


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class RouteTest(unittest.TestCase):
    def test_contract_and_byte_identical_reruns(self):
        with temp_dir() as tmp:
            trace = head(tmp, 400)
            outs = []
            for k in range(2):
                out = os.path.join(tmp, f"out{k}")
                proc = run("route", "--cluster", CLUSTER, "--trace", trace, "--model", "llama3-8b", "--workers", "8",
                           "--policies", "round-robin,kv,kv-topo", "--report", out, "--quiet")
                self.assertIn("TTFT p99", proc.stdout)
                self.assertIn("report.html", proc.stdout)
                outs.append(out)
            self.assertEqual(read_bytes(os.path.join(outs[0], "report.json")), read_bytes(os.path.join(outs[1], "report.json")))
            self.assertEqual(read_bytes(os.path.join(outs[0], "report.html")), read_bytes(os.path.join(outs[1], "report.html")))
            with open(os.path.join(outs[0], "report.json")) as f:
                report = json.load(f)
            self.assertEqual(report["trace"]["requests"], 400)
            for key in ("block_reuse", "token_hit_upper_bound"):
                self.assertGreater(report["trace"][key], 0)
            self.assertEqual(list(report["policies"]), ["round-robin", "kv", "kv-topo"])
            for name, p in report["policies"].items():
                for key in CONTRACT:
                    self.assertIn(key, p, f"{name}: {key}")
                self.assertEqual(p["requests"], 400)
                self.assertGreater(p["ttft_p99_s"], p["ttft_p50_s"])
            with open(os.path.join(outs[0], "report.html")) as f:
                page = f.read()
            self.assertIn('<body data-charts="pending">', page)
            self.assertIn("toposched routing report", page)
            self.assertIn('id="chart-ttft-cdf"', page)

    def test_json_output_equals_report_json(self):
        with temp_dir() as tmp:
            trace = head(tmp, 200)
            out = os.path.join(tmp, "out")
            proc = run("route", "--cluster", CLUSTER, "--trace", trace, "--workers", "4", "--policies", "kv",
                       "--report", out, "--format", "json")
            self.assertEqual(proc.stdout.encode(), read_bytes(os.path.join(out, "report.json")))

    def test_bad_trace_line_names_file_and_line(self):
        with temp_dir() as tmp:
            trace = head(tmp, 10, extra=['{"timestamp": 5, "input_length": 100, "output_length": 3, "hash_ids": [1, 2]}'])
            out = os.path.join(tmp, "out")
            proc = run("route", "--cluster", CLUSTER, "--trace", trace, "--policies", "kv", "--report", out, check=False)
            self.assertEqual(proc.returncode, 1)
            self.assertIn(f"{trace}:3:", proc.stderr)
            self.assertIn("expected 1 hash_ids for input_length 100", proc.stderr)
            self.assertFalse(os.path.exists(out))  # nothing half-written
            proc = run("route", "--cluster", CLUSTER, "--trace", trace, "--policies", "kv", "--skip-bad-rows",
                       "--format", "json", check=False)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("skipped 1 malformed lines", proc.stderr)
            self.assertEqual(json.loads(proc.stdout)["run"]["skipped_rows"], 1)
            broken = head(tmp, 5, extra=['{"timestamp": 5, "input_length": '], name="broken.jsonl")
            proc = run("route", "--cluster", CLUSTER, "--trace", broken, "--policies", "kv", check=False)
            self.assertEqual(proc.returncode, 1)
            self.assertIn(f"{broken}:3:", proc.stderr)

    def test_usage_errors_exit_2(self):
        with temp_dir() as tmp:
            trace = head(tmp, 5)
            for args in (["--policies", "kv,magic"], ["--policies", "kv,kv"], ["--model", "gpt-x"],
                         ["--kv-cache-blocks", "lots"], ["--workers", "0"], ["--warmup-requests", "-3"],
                         ["--warmup-requests", "5"]):  # the trace has 5 requests: none would be measured
                proc = run("route", "--cluster", CLUSTER, "--trace", trace, *args, check=False)
                self.assertEqual(proc.returncode, 2, f"{args}: {proc.stderr}")
                self.assertIn("error:", proc.stderr)
            proc = run("route", "--cluster", CLUSTER, "--trace", os.path.join(tmp, "missing.jsonl"), check=False)
            self.assertEqual(proc.returncode, 1)

    def test_help_lists_policies_and_models(self):
        proc = run("route", "--help")
        for word in ("round-robin", "least-loaded", "kv-topo", "kv-pull-blind", "llama3-70b", "--pd", "--speed"):
            self.assertIn(word, proc.stdout)


if __name__ == "__main__":
    unittest.main()
