"""End-to-end: `toposched discover` on the shared fixtures, and `show`/`path` on its output.

Builds per-node input directories in a temporary folder (file name = node name) from the
fixtures copied to tests/data/discovery (see its README for their origin).
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

TOPOSCHED = os.environ["TOPOSCHED"]
DATA = os.path.join(os.environ["TOPOSCHED_SOURCE_DIR"], "tests", "data", "discovery")
SOURCE_DIR_DATA_SLURM = os.path.join(os.environ["TOPOSCHED_SOURCE_DIR"], "tests", "data", "slurm")
ROUTE_TRACE = os.path.join(os.environ["TOPOSCHED_SOURCE_DIR"], "tests", "data", "traces", "mooncake",
                           "conversation_trace.jsonl")
SU_NODES = ["gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04", "gpu-b01", "gpu-b02", "gpu-b03", "gpu-b04"]


def run(*args, check=True):
    proc = subprocess.run([TOPOSCHED, *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"toposched {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def assert_bad_copy_is_refused_at(test, option, path, old, new, message, at=None):
    """A copy of the fixture at `path` with its first `old` replaced by `new` makes `discover
    OPTION copy` fail with `message` at the file:line:col where `at` (default `old`) starts
    in the original line, and write nothing to stdout."""
    with open(path) as f:
        text = f.read()
    lines = text.splitlines()
    line = next(i for i, l in enumerate(lines, 1) if old in l)
    col = lines[line - 1].index(at or old) + 1
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "bad" + os.path.splitext(path)[1])
        with open(bad, "w") as f:
            f.write(text.replace(old, new, 1))
        proc = run("discover", option, bad, check=False)
    test.assertEqual(proc.returncode, 1, proc.stderr)
    test.assertIn(f"{os.path.basename(bad)}:{line}:{col}", proc.stderr)
    test.assertIn(message, proc.stderr)
    test.assertEqual(proc.stdout, "")


class DiscoverTwoSu(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="toposched-discover-")
        self.topo = os.path.join(self.tmp, "topo")
        self.fabric = os.path.join(self.tmp, "fabric")
        os.makedirs(self.topo)
        os.makedirs(self.fabric)
        for node in SU_NODES:
            shutil.copy(os.path.join(DATA, "h100-hgx-13nic.topo"), os.path.join(self.topo, node + ".topo"))
            shutil.copy(os.path.join(DATA, "fabric-not-supported.csv"), os.path.join(self.fabric, node + ".csv"))
        self.spec = os.path.join(self.tmp, "spec.yaml")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def discover(self, *extra, check=True):
        return run("discover", "--topo-m", self.topo, "--fabric", self.fabric, "--ibnetdiscover",
                   os.path.join(DATA, "two-su-rails-storage.ibnet"), *extra, check=check)

    def test_spec_is_accepted_by_show_and_path(self):
        proc = self.discover("--hca", "mlx5_[01]", "-o", self.spec)
        self.assertEqual(proc.stdout, "")  # the spec went to the file
        self.assertIn("skipped 1 CA", proc.stderr)
        self.assertIn("N/A", proc.stderr)
        show = json.loads(run("show", "--cluster", self.spec, "--format", "json").stdout)
        self.assertEqual(show["nodes"], 8)
        self.assertEqual(show["gpus"], 64)
        self.assertEqual(show["hostlist"], "gpu-a[01-04],gpu-b[01-04]")
        self.assertEqual(show["tiers"], ["leaf", "spine"])
        same_su = json.loads(run("path", "--cluster", self.spec, "gpu-a01:0", "gpu-a04:3", "--format", "json").stdout)
        self.assertEqual(same_su["level"], "tier:leaf")
        other_su = json.loads(run("path", "--cluster", self.spec, "gpu-a01:0", "gpu-b01:0", "--format", "json").stdout)
        self.assertEqual(other_su["level"], "tier:spine")
        nvlink = json.loads(run("path", "--cluster", self.spec, "gpu-b02:1", "gpu-b02:6", "--format", "json").stdout)
        self.assertEqual(nvlink["level"], "nvlink")
        self.assertAlmostEqual(nvlink["bandwidth_GBps"], 18 * 25)

    def test_without_hca_filter_the_storage_leaf_is_reported(self):
        proc = self.discover()
        self.assertIn("STORAGE-LEAF-01", proc.stderr)
        self.assertIn("--hca", proc.stderr)
        self.assertIn("node_types", proc.stdout)  # spec on stdout

    def test_strict_turns_warnings_into_an_error(self):
        proc = self.discover("--hca", "mlx5_[01]", "--strict", "-o", self.spec, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("--strict", proc.stderr)
        self.assertFalse(os.path.exists(self.spec))

    def test_json_output(self):
        proc = self.discover("--hca", "mlx5_[01]", "--format", "json")
        spec = json.loads(proc.stdout)
        self.assertEqual(spec["nodes"][0]["names"], "gpu-a[01-04],gpu-b[01-04]")
        self.assertEqual(spec["node_types"][0]["nics"][0]["gbit"], 400)  # the dump's 4xNDR links
        proc = self.discover("--hca", "mlx5_[01]", "--format", "json", "--nic-gbit", "100")
        self.assertEqual(json.loads(proc.stdout)["node_types"][0]["nics"][0]["gbit"], 100)

    def test_bad_input_names_file_line_column(self):
        bad = os.path.join(self.topo, "gpu-a02.topo")
        with open(bad) as f:
            text = f.read()
        with open(bad, "w") as f:
            f.write(text.replace("NV18", "NVX", 1))
        proc = self.discover(check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertRegex(proc.stderr, r"gpu-a02\.topo:2:\d+: row 'GPU0', column 'GPU1'.*'NVX'")

    def test_usage_errors(self):
        self.assertEqual(run("discover", check=False).returncode, 2)
        self.assertEqual(run("discover", "--ibnetdiscover", os.path.join(DATA, "two-su-rails-storage.ibnet"),
                             "--hca", "mlx5_[", check=False).returncode, 2)


class DiscoverGb200(unittest.TestCase):
    def test_fabric_cliques_become_domains_and_missing_nodes_are_reported(self):
        tmp = tempfile.mkdtemp(prefix="toposched-discover-")
        try:
            topo, fabric = os.path.join(tmp, "topo"), os.path.join(tmp, "fabric")
            os.makedirs(topo)
            os.makedirs(fabric)
            for node in ["gb-r1-n01", "gb-r1-n02", "gb-r2-n01"]:
                shutil.copy(os.path.join(DATA, "gb200-4gpu.topo"), os.path.join(topo, node + ".topo"))
                shutil.copy(os.path.join(DATA, f"fabric-{node}.csv"), os.path.join(fabric, node + ".csv"))
            shutil.copy(os.path.join(DATA, "gb200-4gpu.topo"), os.path.join(topo, "gb-r3-n01.topo"))
            spec = os.path.join(tmp, "gb.yaml")
            proc = run("discover", "--topo-m", topo, "--fabric", fabric, "--gpu-model", "GB200", "--ibnetdiscover",
                       os.path.join(DATA, "gb200-single-ca-no-switch.ibnet"), "-o", spec)
            self.assertIn("no-topology", proc.stderr)
            self.assertIn("gb-r3-n01", proc.stderr)
            show = json.loads(run("show", "--cluster", spec, "--format", "json").stdout)
            self.assertEqual(len(show["accelerator_domains"]), 2)
            p = json.loads(run("path", "--cluster", spec, "gb-r1-n01:0", "gb-r1-n02:3", "--format", "json").stdout)
            self.assertEqual(p["level"], "accel-domain")
            p = json.loads(run("path", "--cluster", spec, "gb-r1-n01:0", "gb-r2-n01:0", "--format", "json").stdout)
            self.assertEqual(p["level"], "cross-root")
        finally:
            shutil.rmtree(tmp)


class DiscoverHybridCubeMesh(unittest.TestCase):
    def test_partial_nvlink_paths(self):
        tmp = tempfile.mkdtemp(prefix="toposched-discover-")
        try:
            topo = os.path.join(tmp, "dgx1-01.topo")
            shutil.copy(os.path.join(DATA, "dgx1-v100.topo"), topo)
            spec = os.path.join(tmp, "dgx1.yaml")
            run("discover", "--topo-m", topo, "--gpu-model", "V100", "-o", spec)

            def path(a, b):
                return json.loads(run("path", "--cluster", spec, f"dgx1-01:{a}", f"dgx1-01:{b}",
                                      "--format", "json").stdout)
            one, two, none = path(0, 1), path(0, 3), path(0, 5)
            self.assertEqual(one["level"], "nvlink")
            self.assertEqual(two["level"], "nvlink")
            self.assertAlmostEqual(two["bandwidth_GBps"], 2 * one["bandwidth_GBps"])
            self.assertEqual(none["level"], "pcie-sys")
            # The per-link speed can be overridden.
            run("discover", "--topo-m", topo, "--gpu-model", "V100", "--nvlink-GBps", "20", "-o", spec)
            self.assertAlmostEqual(path(0, 3)["bandwidth_GBps"], 40)
        finally:
            shutil.rmtree(tmp)


class DiscoverInfersGpuGeneration(unittest.TestCase):
    """Without --gpu-model, the NVLinks per GPU in topo -m name the generation (with a warning)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="toposched-discover-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def discover_one(self, fixture, node, *extra):
        topo = os.path.join(self.tmp, node + ".topo")
        shutil.copy(os.path.join(DATA, fixture), topo)
        spec = os.path.join(self.tmp, node + ".json")
        proc = run("discover", "--topo-m", topo, "--format", "json", "-o", spec, *extra)
        with open(spec) as f:
            return proc, spec, json.load(f)["node_types"][0]

    def test_dgx1v_is_v100_with_pcie_gen3_so_nvlink_beats_pcie(self):
        proc, spec, node_type = self.discover_one("dgx1v-dlperf.topo", "dgx1v-01")
        self.assertIn("inferred V100 from 6 NVLinks per GPU", proc.stderr)
        self.assertEqual(node_type["gpu"]["model"], "V100-SXM2")
        self.assertAlmostEqual(node_type["pcie"]["GBps"], 8 * 128 / 130 * 16 / 8, places=3)  # Gen3 x16

        def path(a, b):
            return json.loads(run("path", "--cluster", spec, f"dgx1v-01:{a}", f"dgx1v-01:{b}",
                                  "--format", "json").stdout)
        nvlink, cross_socket = path(0, 1), path(0, 5)
        self.assertEqual(nvlink["level"], "nvlink")
        self.assertEqual(cross_socket["level"], "pcie-sys")
        self.assertGreater(nvlink["bandwidth_GBps"], cross_socket["bandwidth_GBps"])

    def test_a100_and_h100(self):
        proc, _, node_type = self.discover_one("dgx-a100.topo", "dgx-a100-01")
        self.assertIn("inferred A100 from 12 NVLinks per GPU", proc.stderr)
        self.assertEqual(node_type["gpu"]["model"], "A100-SXM4")
        proc, _, node_type = self.discover_one("h100-hgx-13nic.topo", "hgx-h100-01")
        self.assertIn("inferred H100 from 18 NVLinks per GPU", proc.stderr)
        self.assertEqual(node_type["gpu"]["model"], "H100-SXM5")

    def test_gpu_info_names_the_model(self):
        info = os.path.join(self.tmp, "info")
        os.makedirs(info)
        shutil.copy(os.path.join(DATA, "dgx-a100.gpus.csv"), os.path.join(info, "dgx-a100-01.csv"))
        proc, _, node_type = self.discover_one("dgx-a100.topo", "dgx-a100-01", "--gpu-info", info)
        self.assertNotIn("inferred", proc.stderr)
        self.assertEqual(node_type["gpu"]["model"], "A100-SXM4")

    def test_bad_gpu_info_names_the_position(self):
        bad = os.path.join(self.tmp, "n1.csv")
        with open(bad, "w") as f:
            f.write("name, pci.bus_id\nNVIDIA A100-SXM4-40GB, not-a-bus-id\n")
        proc = run("discover", "--gpu-info", bad, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("n1.csv:2:24", proc.stderr)
        self.assertIn("PCI bus id", proc.stderr)


class DiscoverClusterWideSources(unittest.TestCase):
    def spec_of(self, *args):
        return json.loads(run("discover", *args, "--format", "json").stdout)

    def test_kubernetes_labels_and_label_map(self):
        nodes = os.path.join(DATA, "k8s-nodes.json")
        proc = run("discover", "--k8s-nodes", nodes, "--format", "json")
        self.assertIn("cpu-login", proc.stderr)  # skipped CPU node, reported
        spec = json.loads(proc.stdout)
        types = {t["name"]: t for t in spec["node_types"]}
        self.assertIn("GB200x4-generic", types)
        self.assertIn("H100-SXM5x8-generic", types)
        self.assertEqual(len(spec["accelerator_domains"]), 1)
        spec = self.spec_of("--k8s-nodes", nodes, "--label-map", "example.com/rack=tier-0")
        names = ",".join(group["names"] for group in spec["nodes"])
        self.assertIn("cpu-login", names)
        self.assertEqual(run("discover", "--k8s-nodes", nodes, "--label-map", "bad", check=False).returncode, 2)

    def test_resource_slices_with_clique_labels(self):
        slices = os.path.join(DATA, "dra", "resource-slices.json")
        nodes = os.path.join(DATA, "dra", "nodes.json")
        spec = self.spec_of("--resource-slices", slices, "--k8s-nodes", nodes)
        types = {t["name"]: t for t in spec["node_types"]}
        self.assertEqual(types["GB200x4-generic"]["gpu"]["count"], 4)
        self.assertEqual(types["L40Sx8-generic"]["links"][0], "X PHB NODE NODE SYS SYS SYS SYS")
        self.assertEqual(len(spec["accelerator_domains"]), 2)  # the two gpu.clique values
        # A malformed pciBusID: exit 1, the file and the value's line and column.
        assert_bad_copy_is_refused_at(self, "--resource-slices", slices, '"0018:01:00.0"', '"0018:01:00"',
                                      "expected a PCI bus id")

    def test_aws_instance_topology(self):
        spec = self.spec_of("--aws-topology", os.path.join(DATA, "aws-instance-topology.json"))
        self.assertEqual([t["name"] for t in spec["fabric"]["tiers"]], ["leaf", "spine", "core"])
        self.assertEqual(spec["accelerator_domains"][0]["name"], "cr-0123456789example")

    def test_google_cloud_instances(self):
        """gcloud's instance list: sub-blocks, blocks and clusters become leaf, spine and core;
        the A4X sub-block is an NVLink domain; the stopped VM and the CPU VM are reported, not
        placed; the spec exports to Slurm with the sub-blocks as leaf switches."""
        path = os.path.join(DATA, "gcp-instances.json")
        proc = run("discover", "--gcp-instances", path, "--format", "json")
        self.assertIn("not RUNNING left out (a stopped VM has no physical host): a3u-005", proc.stderr)
        self.assertIn("without GPUs", proc.stderr)
        self.assertIn("slurm-controller", proc.stderr)
        spec = json.loads(proc.stdout)
        self.assertEqual([t["name"] for t in spec["fabric"]["tiers"]], ["leaf", "spine", "core"])
        types = {t["name"]: t for t in spec["node_types"]}
        self.assertEqual(types["H200x8-generic"]["gpu"]["count"], 8)
        self.assertEqual({n["gbit"] for n in types["H200x8-generic"]["nics"]}, {400})
        self.assertEqual(types["GB200x4-generic"]["gpu"]["count"], 4)
        domains = spec["accelerator_domains"]
        self.assertEqual([(d["name"], d["nodes"]) for d in domains],
                         [("5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b", "a4x-[001-002]")])
        slower = self.spec_of("--gcp-instances", path, "--nic-gbit", "200")
        self.assertEqual({n["gbit"] for t in slower["node_types"] for n in t["nics"]}, {200})
        with tempfile.TemporaryDirectory() as d:
            spec_path = os.path.join(d, "spec.yaml")
            run("discover", "--gcp-instances", path, "-o", spec_path)
            conf = run("export", "-c", spec_path, "--to", "slurm-tree").stdout
            self.assertIn("SwitchName=0f1e2d3c4b5a69788796a5b4c3d2e1f0 Nodes=a3u-[001-002]", conf)
            self.assertIn("SwitchName=1a2b3c4d5e6f70819203a4b5c6d7e8f9 Nodes=a3u-[003-004]", conf)
        assert_bad_copy_is_refused_at(self, "--gcp-instances", path, '"acceleratorCount": 8',
                                      '"acceleratorCount": "eight"', "acceleratorCount", at="8")

    def test_oci_compute_hosts_and_instance_metadata_agree(self):
        """OCI: the compute-host list (nodes named by instance OCID) and the hosts' own
        rdmaTopologyData (per-host files and pdsh lines, nodes named by host) give the same
        tree: two local blocks of H100 hosts and one of GB200s, under one network block and
        one HPC island, and the GB200s' GPU memory fabric as their NVLink domain."""
        spec = self.spec_of("--oci-compute-hosts", os.path.join(DATA, "oci-compute-hosts.json"))
        metadata = self.spec_of("--oci-rdma-topology", os.path.join(DATA, "oci-rdma"),
                                "--oci-rdma-topology", os.path.join(DATA, "oci-rdma-pdsh.txt"))

        def by_tier(s):
            return {t: [w["name"] for w in s["fabric"]["switches"] if w["tier"] == t] for t in ("leaf", "spine", "core")}

        self.assertEqual(by_tier(spec), by_tier(metadata))
        self.assertEqual(len(by_tier(spec)["leaf"]), 3)
        self.assertEqual([d["name"] for d in spec["accelerator_domains"]],
                         [d["name"] for d in metadata["accelerator_domains"]])
        self.assertEqual(metadata["accelerator_domains"][0]["nodes"], "gb-[01-02]")
        types = {t["name"]: t["gpu"]["count"] for t in spec["node_types"]}
        self.assertEqual(types, {"GB200x4-generic": 4, "H100-SXM5x8-generic": 8})
        with tempfile.TemporaryDirectory() as d:
            pdsh = os.path.join(d, "pdsh.txt")
            with open(os.path.join(DATA, "oci-rdma-pdsh.txt")) as f:
                lines = f.read().splitlines()
            with open(pdsh, "w") as f:
                f.write(lines[0] + "\n" + "gb-03: curl: (28) Connection timed out\n")
            proc = run("discover", "--oci-rdma-topology", pdsh, "--gpu-model", "GB200", "--strict", check=False)
            self.assertEqual(proc.returncode, 1)
            self.assertIn("gave no rdmaTopologyData JSON", proc.stderr)
            self.assertIn("pdsh.txt:2: gb-03", proc.stderr)
            with open(pdsh, "w") as f:
                f.write(lines[0].replace('"customerLocalBlock": "', '"customerLocalBlock": ["x"], "extra": "', 1) + "\n")
            proc = run("discover", "--oci-rdma-topology", pdsh, check=False)
            self.assertEqual(proc.returncode, 1)
            col = lines[0].index('"customerLocalBlock": "') + len('"customerLocalBlock": ') + 1
            self.assertIn(f"pdsh.txt:1:{col}:", proc.stderr)
            self.assertEqual(proc.stdout, "")

    def test_cloud_instances_meet_their_hosts_files(self):
        """AWS names its instances by id, the hosts' topo -m files by host name: the pdsh
        output of the hosts' instance-id query (--instance-ids) or a mapping (--node-names)
        renames the instances, so each is one node with the switches from AWS and the GPUs
        and NICs from its topo -m."""
        aws = os.path.join(DATA, "aws-instance-topology.json")
        with tempfile.TemporaryDirectory() as d:
            topo = os.path.join(d, "topo")
            os.makedirs(topo)
            for host in ("gpu-01", "gpu-02"):
                shutil.copy(os.path.join(DATA, "h100-hgx-13nic.topo"), os.path.join(topo, host + ".topo"))
            ids = os.path.join(d, "ids.txt")
            with open(ids, "w") as f:
                f.write("gpu-01: i-1111111111example\ngpu-02: i-2222222222example\n")
            names = os.path.join(d, "names.yaml")
            with open(names, "w") as f:
                f.write("i-1111111111example: gpu-01\ni-2222222222example: gpu-02\n")
            for option, path in (("--instance-ids", ids), ("--node-names", names)):
                with self.subTest(option=option):
                    spec = self.spec_of("--aws-topology", aws, "--topo-m", topo, option, path, "--gpu-model", "H100")
                    by_name = {n["names"]: n["type"] for n in spec["nodes"]}
                    self.assertEqual(by_name["gpu-[01-02]"], "H100-SXM5x8")  # topo -m's type, not a generic one
                    leaves = {s["name"]: s.get("nodes") for s in spec["fabric"]["switches"] if s["tier"] == "leaf"}
                    self.assertEqual(leaves["nn-3333333333example"], "gpu-01")
                    self.assertEqual(leaves["nn-4444444444example"], "gpu-02")
            with open(ids, "a") as f:
                f.write("gpu-03: i-1111111111example\n")
            proc = run("discover", "--aws-topology", aws, "--instance-ids", ids, check=False)
            self.assertEqual(proc.returncode, 1)
            self.assertIn("ids.txt:3:9: instance 'i-1111111111example' is on node 'gpu-01' and on node 'gpu-03'",
                          proc.stderr)

    def test_topograph_model_and_slurm_conf_as_inputs(self):
        spec = self.spec_of("--topograph-model", os.path.join(DATA, "topograph-model.yaml"))
        self.assertEqual(len(spec["accelerator_domains"]), 2)
        spec = self.spec_of("--slurm-topology", os.path.join(DATA, "slurm-tree.conf"))
        self.assertEqual(len(spec["fabric"]["switches"]), 7)

    def test_slurm_node_list_and_kubernetes_memory_size_the_host_tier(self):
        """Slurm's node list (scontrol -o show node, in the captured 22.05 format of
        tests/data/slurm) beside topology.conf gives each node its GPUs and RealMemory; the
        spec's host_memory_gb is what `route --host-cache-gb P%` takes a share of. A Kubernetes
        NodeList's status.capacity.memory does the same."""
        with open(os.path.join(SOURCE_DIR_DATA_SLURM, "scontrol_show_node.txt")) as f:
            captured = f.readline()  # gpu01's record: Gres=gpu:h100:4 ... RealMemory=1024 ...
        with tempfile.TemporaryDirectory() as d:
            nodes = os.path.join(d, "nodes.txt")
            with open(nodes, "w") as f:
                for i in range(1, 17):
                    f.write(captured.replace("NodeName=gpu01", f"NodeName=dgx{i:02d}")
                            .replace("Gres=gpu:h100:4", "Gres=gpu:h100:8(S:0-1)")
                            .replace("RealMemory=1024", "RealMemory=2063937"))
                f.write(captured.replace("NodeName=gpu01", "NodeName=login1").replace("Gres=gpu:h100:4", "Gres=(null)"))
            spec_path = os.path.join(d, "spec.json")
            proc = run("discover", "--slurm-topology", os.path.join(DATA, "slurm-tree.conf"), "--slurm-nodes", nodes,
                       "--format", "json", "-o", spec_path)
            self.assertIn("login1", proc.stderr)  # skipped: no gpu gres
            with open(spec_path) as f:
                spec = json.load(f)
            self.assertEqual([t["host_memory_gb"] for t in spec["node_types"]], [2164])
            self.assertEqual(spec["node_types"][0]["gpu"]["count"], 8)
            self.assertIn("8 NICs, 2164 GB host memory", run("show", "--cluster", spec_path).stdout)
            summary = json.loads(run("show", "--cluster", spec_path, "--format", "json").stdout)
            self.assertEqual(summary["node_types"][0]["host_memory_gb"], 2164)
            trace = os.path.join(d, "trace.jsonl")
            with open(ROUTE_TRACE) as src, open(trace, "w") as dst:
                dst.writelines(next(src) for _ in range(60))
            report = json.loads(run("route", "--cluster", spec_path, "--trace", trace, "--workers", "4",
                                    "--policies", "kv", "--host-cache-gb", "10%", "--format", "json").stdout)
            self.assertAlmostEqual(report["run"]["host_cache_gb"], 216.4)
            # Bad RealMemory: exit 1 with the file and line.
            bad = os.path.join(d, "bad.txt")
            with open(bad, "w") as f:
                f.write(captured + captured.replace("gpu01", "gpu02").replace("RealMemory=1024", "RealMemory=1T"))
            proc = run("discover", "--slurm-nodes", bad, check=False)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn("bad.txt:2", proc.stderr)
            self.assertIn("RealMemory", proc.stderr)
            # Kubernetes: status.capacity.memory as the kubelet reports it.
            k8s = os.path.join(d, "nodes.json")
            with open(os.path.join(DATA, "k8s-nodes.json")) as f:
                node_list = json.load(f)
            for item in node_list["items"]:
                item.setdefault("status", {}).setdefault("capacity", {})["memory"] = "2113442596Ki"
            with open(k8s, "w") as f:
                json.dump(node_list, f)
            spec = self.spec_of("--k8s-nodes", k8s)
            self.assertEqual({t["host_memory_gb"] for t in spec["node_types"]}, {2164})
            # Without it a type says nothing of host memory, in the spec and in `show`.
            summary = json.loads(run("show", "--cluster", os.path.join(DATA, "k8s-nodes.json"), "--format", "json").stdout)
            self.assertTrue(all("host_memory_gb" not in t for t in summary["node_types"]))

    def test_topograph_model_as_cluster_spec(self):
        show = json.loads(run("show", "--cluster", os.path.join(DATA, "topograph-model.yaml"),
                              "--format", "json").stdout)
        self.assertEqual(show["nodes"], 32)
        self.assertEqual(show["tiers"], ["leaf", "spine", "core"])

    def test_bad_topology_conf_names_position(self):
        with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
            f.write("SwitchName=s1 Nodes=n[1-4]\nSwitchName=top Switches=s1,s2\n")
            path = f.name
        try:
            proc = run("show", "--cluster", path, check=False)
            self.assertEqual(proc.returncode, 1)
            self.assertIn(f"{path}:2:28:", proc.stderr)
            self.assertIn("'s2'", proc.stderr)
        finally:
            os.unlink(path)


class ExportedTopologyConfReadsBack(unittest.TestCase):
    """`export --to slurm-tree` then `--cluster topology.conf`: the reader and the writer agree."""

    def test_round_trip_keeps_nodes_and_joining_tiers(self):
        tmp = tempfile.mkdtemp(prefix="toposched-discover-")
        try:
            preset = "preset:dgx-h100?nodes=64"
            conf = os.path.join(tmp, "topology.conf")
            run("export", "--cluster", preset, "--to", "slurm-tree", "-o", conf)
            original = json.loads(run("show", "--cluster", preset, "--format", "json").stdout)
            read_back = json.loads(run("show", "--cluster", conf, "--format", "json").stdout)
            self.assertEqual(read_back["nodes"], original["nodes"])
            self.assertEqual(read_back["hostlist"], original["hostlist"])
            self.assertEqual(len(read_back["tiers"]), len(original["tiers"]))

            spec = json.loads(run("show", "--cluster", preset, "--spec", "--format", "json").stdout)
            leaves = [expand(s["nodes"]) for s in spec["fabric"]["switches"] if "nodes" in s]
            self.assertGreater(len(leaves), 1)

            def joining_tier(cluster, tiers, a, b):
                out = run("path", "--cluster", cluster, f"{a}:0", f"{b}:0", "--format", "json").stdout
                level = json.loads(out)["level"]
                return tiers.index(level.split(":", 1)[1]) if level.startswith("tier:") else level

            for a, b in [(leaves[0][0], leaves[0][-1]), (leaves[0][0], leaves[-1][0])]:
                self.assertEqual(joining_tier(conf, read_back["tiers"], a, b),
                                 joining_tier(preset, original["tiers"], a, b), (a, b))
        finally:
            shutil.rmtree(tmp)


def expand(hostlist):
    """Expands a hostlist of items NAME or PREFIX[LO-HI,...]SUFFIX (enough for the presets)."""
    import re
    names = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", hostlist):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", item)
        if not m:
            names.append(item)
            continue
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            hi = hi or lo
            for i in range(int(lo), int(hi) + 1):
                names.append(f"{prefix}{i:0{len(lo)}d}{suffix}")
    return names


class SlurmTopologyAsCluster(unittest.TestCase):
    def test_topology_conf_is_detected_by_content(self):
        with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
            f.write("# two leaves under one spine\n"
                    "SwitchName=leaf1 Nodes=n[01-04]\n"
                    "SwitchName=leaf2 \\\n   Nodes=n[05-08]   # second rack\n"
                    "SwitchName=spine Switches=leaf[1-2]\n")
            path = f.name
        try:
            show = json.loads(run("show", "--cluster", path, "--format", "json").stdout)
            self.assertEqual(show["hostlist"], "n[01-08]")
            self.assertEqual(show["tiers"], ["leaf", "spine"])
            p = json.loads(run("path", "--cluster", path, "n01:0", "n08:0", "--format", "json").stdout)
            self.assertEqual(p["level"], "tier:spine")
        finally:
            os.unlink(path)


if __name__ == "__main__":
    unittest.main()
