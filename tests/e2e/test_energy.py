"""End-to-end: GPU energy in `toposched simulate` (issue 17, acceptance 1) on the demo's run
(scripts/demo: 64 DGX H100, examples/llm-mix.yaml, easy-backfill, every policy): report.json
has energy_kwh and its split per policy, the parts add up, and topo loses the least energy
to communication. A spec's gpu.power override changes the figures as documented."""
import json
import os
import unittest

from toposched_cli import SOURCE_DIR, run, temp_dir

PARTS = ["energy_kwh_useful", "energy_kwh_lost_comm", "energy_kwh_idle_queued", "energy_kwh_idle_no_demand"]


class EnergyTest(unittest.TestCase):
    def test_demo_run_topo_loses_least_energy_to_communication(self):
        with temp_dir() as tmp:
            out = os.path.join(tmp, "out")
            proc = run("simulate", "--cluster", "preset:dgx-h100?nodes=64", "--generate",
                       os.path.join(SOURCE_DIR, "examples", "llm-mix.yaml"), "--policies", "all", "--discipline",
                       "easy-backfill", "--report", out, "--quiet")
            self.assertIn("GPU energy (MWh)", proc.stdout)
            self.assertIn("useful GPU-hours per MWh", proc.stdout)
            with open(os.path.join(out, "report.json")) as f:
                policies = json.load(f)["policies"]
            for name, p in policies.items():
                for key in ["energy_kwh", *PARTS, "useful_gpu_hours_per_mwh"]:
                    self.assertIn(key, p, name)
                self.assertAlmostEqual(sum(p[k] for k in PARTS), p["energy_kwh"], delta=0.01)
                self.assertGreater(p["energy_kwh_useful"], 0, name)
            topo = policies["topo"]["energy_kwh_lost_comm"]
            for name, p in policies.items():
                if name != "topo":
                    self.assertLess(topo, p["energy_kwh_lost_comm"], name)
            with open(os.path.join(out, "report.html")) as f:
                self.assertIn("chart-energy", f.read())

    def test_spec_power_override_scales_the_energy(self):
        trace = os.path.join(SOURCE_DIR, "tests", "data", "traces", "native", "small.csv")
        with temp_dir() as tmp:
            specs = {}
            for name, power in (("default", ""), ("capped", ", power: {busy_w: 350, comm_w: 100, idle_w: 35}")):
                path = os.path.join(tmp, name + ".yaml")
                with open(path, "w") as f:
                    f.write("name: c\nnode_types:\n  - name: h\n    gpu: {model: H100-SXM5, count: 8" + power + "}\n"
                            "    nvlink: {links: 18}\nnodes:\n  - {names: \"n[01-16]\", type: h}\n")
                specs[name] = json.loads(run("simulate", "--cluster", path, "--trace", trace, "--policies", "first-fit",
                                             "--format", "json", "--quiet").stdout)["policies"]["first-fit"]
            d, c = specs["default"], specs["capped"]
            # Same schedule, half the busy and idle power: half the energy of those parts.
            self.assertAlmostEqual(c["energy_kwh_useful"], d["energy_kwh_useful"] / 2, delta=0.01)
            self.assertAlmostEqual(c["energy_kwh_idle_no_demand"], d["energy_kwh_idle_no_demand"] / 2, delta=0.01)
            self.assertEqual(c["gpu_hours_useful"], d["gpu_hours_useful"])


if __name__ == "__main__":
    unittest.main()
