"""End-to-end: report.html renders in headless Chromium (Debian's `chromium`) with every
chart drawn and no script error, and a screenshot of it is saved next to the binary
(report-screenshot.png). The page marks <body data-charts="ok"> once all vega-embed
promises resolved and each chart has marks; a broken spec must turn that into an error."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from toposched_cli import BINARY, run, temp_dir

CHARTS = ["chart-jct-cdf", "chart-utilisation", "chart-queue", "chart-fragmentation", "chart-slowdown", "chart-gpu-hours", "chart-energy", "chart-summary"]


def chromium(*args, timeout=240):
    with tempfile.TemporaryDirectory(prefix="toposched-chromium-") as profile:
        cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
               "--virtual-time-budget=30000", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@unittest.skipUnless(shutil.which("chromium"), "chromium is not installed (scripts/install-deps installs it)")
class ReportBrowserTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = temp_dir()
        d = cls.tmp.name
        mix = os.path.join(d, "mix.yaml")
        with open(mix, "w") as f:
            f.write("seed: 3\njobs: 150\nmax_gpus: 64\narrival_rate_per_hour: 40\n")
        cls.out = os.path.join(d, "out")
        run("simulate", "--cluster", "preset:dgx-h100?nodes=16&su_size=4", "--generate", mix, "--policies", "all",
            "--report", cls.out, "--quiet")
        cls.html = os.path.join(cls.out, "report.html")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def dom(self, path):
        proc = chromium("--dump-dom", "file://" + path)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        return proc.stdout

    def test_every_chart_renders_without_script_error(self):
        dom = self.dom(self.html)
        body = re.search(r"<body data-charts=[^>]*>", dom).group(0)
        self.assertIn('data-charts="ok"', body, body)
        self.assertIn(f'data-charts-count="{len(CHARTS)}"', body)
        for chart in CHARTS:
            m = re.search(r'<div class="chart[^"]*" id="' + chart + r'"[^>]*>(.*?)</svg>', dom, re.S)
            self.assertIsNotNone(m, f"{chart}: no svg")
            self.assertRegex(m.group(1), r"<path|<rect|<line", chart)

    def test_a_broken_chart_is_detected(self):
        with open(self.html) as f:
            page = f.read()
        broken = page.replace('"mark":{"type":"boxplot"', '"mark":{"type":"no-such-mark"', 1)
        self.assertNotEqual(broken, page)
        path = os.path.join(self.out, "broken.html")
        with open(path, "w") as f:
            f.write(broken)
        body = re.search(r"<body data-charts=[^>]*>", self.dom(path)).group(0)
        self.assertNotIn('data-charts="ok"', body)
        self.assertIn('data-charts="error', body)

    def test_screenshot(self):
        shot = os.path.join(os.path.dirname(os.path.abspath(BINARY)), "report-screenshot.png")
        if os.path.exists(shot):
            os.remove(shot)
        proc = chromium(f"--screenshot={shot}", "--window-size=1400,3000", "--hide-scrollbars", "file://" + self.html)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        with open(shot, "rb") as f:
            png = f.read()
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        # A page of charts compresses far worse than a blank one (a blank 1400x2400 PNG is a few KB).
        self.assertGreater(len(png), 60_000)
        print(f"screenshot: {shot}")


@unittest.skipUnless(shutil.which("chromium"), "chromium is not installed (scripts/install-deps installs it)")
class RouteReportBrowserTest(unittest.TestCase):
    """`toposched route` writes its report in the same page shell (formats/html_page)."""

    def test_every_route_chart_renders(self):
        with temp_dir() as d:
            trace = os.path.join(d, "head.jsonl")
            src = os.path.join(os.environ.get("TOPOSCHED_SOURCE_DIR", "."), "tests", "data", "traces", "mooncake",
                               "conversation_trace.jsonl")
            with open(src) as f, open(trace, "w") as out:
                out.writelines(next(f) for _ in range(300))
            report = os.path.join(d, "out")
            run("route", "--cluster", "preset:dgx-h100?nodes=2", "--trace", trace, "--policies", "round-robin,kv,kv-topo",
                "--report", report, "--quiet")
            proc = chromium("--dump-dom", "file://" + os.path.join(report, "report.html"))
            self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
            body = re.search(r"<body data-charts=[^>]*>", proc.stdout).group(0)
            self.assertIn('data-charts="ok"', body, body)
            self.assertIn('data-charts-count="6"', body)  # TTFT CDF, hit rates, KV bytes, one load chart per policy


if __name__ == "__main__":
    unittest.main()
