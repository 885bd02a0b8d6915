"""The plugin build with Dynamic Resource Allocation (issue 31, acceptance 1, DRA part):
pods whose GPUs come from ResourceClaims (resource.k8s.io/v1) are placed by toposched, and
kube-scheduler's own DynamicResources plugin allocates them exactly toposched's GPUs.

The real control plane of test_k8s_kube_scheduler.py (kube-apiserver and kube-scheduler
v1.37.2, here toposched-kube-scheduler with deploy/kubernetes/scheduler-plugin-config.yaml's
profile) and 36 fake GB200 trays in two NVL72 racks (`preset:gb200-nvl72?racks=2`, 4 GPUs
each, 18 trays per NVLink domain). The test publishes what NVIDIA's DRA driver (v25.8+)
publishes: one ResourceSlice per node, driver gpu.nvidia.com, one device per GPU with `uuid`,
`productName`, `resource.kubernetes.io/pciBusID` and `resource.kubernetes.io/pcieRoot`, no
`index`/`minor`, and the DeviceClass gpu.nvidia.com of its chart. The devices are listed out
of PCI order and named by a minor number that is not the PCI order, so a plugin that took the
slice's order or the names for toposched's GPU indices, or kube-scheduler allocating by itself
(first fit in slice order), gives other devices than the ones asserted.

Pods use ResourceClaimTemplates; the test acts as kube-controller-manager's resourceclaim
controller (no controller manager runs): for each pod it creates the claim from the template,
owned by the pod, and records it in the pod's status.resourceClaimStatuses.

Asserted, read back from the API server:
- every pod is bound, its claim allocated (by DynamicResources' PreBind: reservedFor is the
  pod) with exactly the devices toposched planned: the node's GPUs at the indices of the pod's
  toposched.io/gpus annotation, in PCI bus order, identified by uuid, on the bound node;
- GET /v1/jobs holds the same GPUs; every group sits in one NVLink domain; no device is
  allocated twice;
- a claim toposched cannot place (allocationMode All) leaves its pod unbound with the reason;
- Permit: a DRA group of which one member cannot be placed binds no member, and after the
  time-out the waiting members' claims are deallocated again (nothing half allocated);
- GPU and NIC on one pcieRoot: each node also publishes a NIC driver's slice (a NIC on each
  GPU's root complex, listed first on another root); a claim of one GPU and one NIC with
  matchAttribute resource.kubernetes.io/pcieRoot over both gets toposched's GPU and the NIC
  on that GPU's root.

build/kube/toposched-kube-scheduler comes from scripts/build-kube (make test builds it): a
machine without it fails these tests, it does not skip them.
"""

import hashlib
import json
import os
import random
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k8s_harness import SCHEDULER_NAME, ControlPlane, topology_labels  # noqa: E402
from serve_harness import Server  # noqa: E402

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
CLUSTER = "preset:gb200-nvl72?racks=2"
PREFIX = "/toposched"
NAMESPACE = "ml"
DRIVER = "gpu.nvidia.com"
DOMAIN_LABEL = "accelerator.topograph.run/domain"
RESOURCE = "/apis/resource.k8s.io/v1"
PERMIT_WAIT_S = 4
WAIT_S = 180
# A GB200 tray's four GPUs: PCI bus IDs in PCI order, and the pcieRoot of each.
PCI = ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"]
ROOTS = ["pci0008:00", "pci0009:00", "pci0018:00", "pci0019:00"]


def gpu_uuid(node, pci):
    h = hashlib.sha1(f"{node}/{pci}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def resource_slice(node, rng):
    """What dra-driver-nvidia-gpu v25.8+ publishes for a node: one pool, one slice, one device
    per GPU. Device names carry a minor number that differs from the PCI order, and the devices
    are listed in a shuffled order."""
    minors = list(range(4))
    rng.shuffle(minors)
    devices = []
    for i, pci in enumerate(PCI):
        devices.append({
            "name": f"gpu-{minors[i]}",
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": gpu_uuid(node, pci)},
                "productName": {"string": "NVIDIA GB200"},
                "brand": {"string": "Nvidia"},
                "architecture": {"string": "Blackwell"},
                "cudaComputeCapability": {"version": "10.0.0"},
                "driverVersion": {"version": "580.82.7"},
                "resource.kubernetes.io/pciBusID": {"string": pci},
                "resource.kubernetes.io/pcieRoot": {"string": ROOTS[i]},
            },
            "capacity": {"memory": {"value": "189471Mi"}},
        })
    rng.shuffle(devices)
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    }


DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
    "spec": {"selectors": [{"cel": {"expression":
                                    f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"}}]},
}


def claim_template(name, request, extra=None, constraints=None):
    requests = [{"name": "gpus", "exactly": request}] + (extra or [])
    devices = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"spec": {"devices": devices}}}


NIC_DRIVER = "nic.toposched.test"
NIC_CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": NIC_DRIVER},
    "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{NIC_DRIVER}'"}}]},
}


def nic_slice(node):
    """A NIC DRA driver's slice (as dranet publishes: pciBusID and pcieRoot): nic-x on a root
    complex without GPUs listed first, then one NIC on each GPU's root."""
    def nic(name, bus, root):
        return {"name": name, "attributes": {"resource.kubernetes.io/pciBusID": {"string": bus},
                                             "resource.kubernetes.io/pcieRoot": {"string": root}}}
    devices = [nic("nic-x", "0001:01:00.0", "pci0001:00")]
    devices += [nic(f"nic-{i}", f"{root[3:7]}:02:00.0", root) for i, root in enumerate(ROOTS)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{NIC_DRIVER}"},
            "spec": {"driver": NIC_DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


TEMPLATES = [
    claim_template("gpu-4", {"deviceClassName": DRIVER, "count": 4}),
    claim_template("gpu-2", {"deviceClassName": DRIVER, "count": 2,
                             "selectors": [{"cel": {"expression":
                                                    f"device.attributes['{DRIVER}'].productName == 'NVIDIA GB200'"}}]}),
    claim_template("gpu-1", {"deviceClassName": DRIVER}),  # count defaults to 1
    claim_template("gpu-all", {"deviceClassName": DRIVER, "allocationMode": "All"}),
    claim_template("gpu-nic", {"deviceClassName": DRIVER}, [{"name": "nic", "exactly": {"deviceClassName": NIC_DRIVER}}],
                   [{"requests": ["gpus", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
]


class Job:
    """`size` pods using ResourceClaimTemplate `template`; a coscheduling group when size > 1."""

    def __init__(self, name, size, template, gpus, shape=None):
        self.name, self.size, self.template, self.gpus = name, size, template, gpus
        self.shape = shape or {}

    def job_id(self):
        return f"k8s:{NAMESPACE}:{self.name}" if self.size > 1 else f"k8s:{NAMESPACE}:pod:{self.name}-0"

    def pod_names(self):
        return [f"{self.name}-{i}" for i in range(self.size)]

    def pod(self, index):
        labels, annotations = {}, {f"toposched.io/{k}": str(v) for k, v in self.shape.items()}
        if self.size > 1:
            labels["scheduling.x-k8s.io/pod-group"] = self.name
            annotations["scheduling.x-k8s.io/min-member"] = str(self.size)
            labels["batch.kubernetes.io/job-completion-index"] = str(index)
        resources = {"cpu": "1", "memory": "1Gi"}
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{self.name}-{index}", "namespace": NAMESPACE, "labels": labels,
                         "annotations": annotations},
            "spec": {"schedulerName": SCHEDULER_NAME, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": self.template}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": resources, "limits": resources,
                                                   "claims": [{"name": "gpus"}]}}]},
        }


class PluginBuildDRA(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="toposched-k8s-dra-")
        cls.kube = ControlPlane()  # raises (the test fails) when the binaries are missing
        cls.kube.start()
        cls.labels = topology_labels(TOPOSCHED, CLUSTER)
        # No nvidia.com/gpu on the nodes: their GPUs are DRA devices only.
        cls.kube.add_nodes(sorted(cls.labels.items()), gpus=0)
        cls.kube.ensure_namespace(NAMESPACE)
        rng = random.Random(31)
        cls.slices = {}
        for node in sorted(cls.labels):
            s = resource_slice(node, rng)
            cls.kube.api.create(f"{RESOURCE}/resourceslices", s)
            cls.slices[node] = s
            cls.kube.api.create(f"{RESOURCE}/resourceslices", nic_slice(node))
        cls.kube.api.create(f"{RESOURCE}/deviceclasses", DEVICE_CLASS)
        cls.kube.api.create(f"{RESOURCE}/deviceclasses", NIC_CLASS)
        for t in TEMPLATES:
            cls.kube.api.create(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaimtemplates", t)

    @classmethod
    def tearDownClass(cls):
        cls.kube.stop()
        cls.tmp.cleanup()

    def start(self, name, permit_wait_s=None):
        k = self.kube
        server = Server(CLUSTER, f"sqlite:{self.tmp.name}/{name}.db", self.tmp.name,
                        ["--k8s-extender", "--url-prefix", PREFIX, "--k8s-api", k.url(),
                         "--k8s-token-file", k.token_file, "--k8s-ca-file", k.ca_file])
        self.addCleanup(server.stop)
        k.start_scheduler(f"{server.url()}{PREFIX}", True, plugin=True, permit_wait_s=permit_wait_s)
        self.addCleanup(self.delete_all)
        self.addCleanup(k.stop_scheduler)
        return server

    # -- the resourceclaim controller's part ------------------------------------------------
    def create_pod(self, job, index):
        """Creates the pod, then its claim from the template (owned by the pod, named in the
        pod's status), as kube-controller-manager's resourceclaim controller does."""
        pod = self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", job.pod(index))
        name = pod["metadata"]["name"]
        template = next(t for t in TEMPLATES if t["metadata"]["name"] == job.template)
        self.kube.api.create(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{name}-gpus", "namespace": NAMESPACE,
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "gpus"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                              "uid": pod["metadata"]["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": template["spec"]["spec"]})
        self.kube.api.ok("PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/status",
                         {"status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": f"{name}-gpus"}]}},
                         "application/merge-patch+json")

    def claim(self, pod_name):
        return self.kube.api.get(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims/{pod_name}-gpus")

    def delete_all(self):
        """Pods and claims (the finalizer a scheduler puts on an allocated claim is the
        resourceclaim controller's to drop once the pod is gone: the test's part here)."""
        for pod in self.kube.pods(NAMESPACE):
            self.kube.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}")
        claims = self.kube.api.get(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims")["items"]
        for c in claims:
            path = f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims/{c['metadata']['name']}"
            if c["metadata"].get("finalizers"):
                self.kube.api.ok("PATCH", path, {"metadata": {"finalizers": None}}, "application/merge-patch+json")
            self.kube.api.delete(path)
        deadline = time.monotonic() + 60
        while self.kube.pods(NAMESPACE) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.kube.pods(NAMESPACE), [])

    def wait_bound(self, names):
        pods, unbound = self.kube.wait_bound(NAMESPACE, names, WAIT_S)
        if unbound:
            self.fail(f"{len(unbound)} pods not bound after {WAIT_S} s, e.g. {unbound[:5]}:\n"
                      + self.kube.log_tail("kube-scheduler", 40))
        return pods

    def bound(self, names):
        pods = {p["metadata"]["name"]: p for p in self.kube.pods(NAMESPACE)}
        return sorted(n for n in names if n in pods and pods[n]["spec"].get("nodeName"))

    def devices_in_pci_order(self, node):
        devices = self.slices[node]["spec"]["devices"]
        return sorted(devices, key=lambda d: d["attributes"]["resource.kubernetes.io/pciBusID"]["string"])

    def events(self):
        items = self.kube.api.get(f"/api/v1/namespaces/{NAMESPACE}/events").get("items", [])
        return "\n".join(e.get("message", "") for e in items)

    # -- tests --------------------------------------------------------------------------------
    def test_dra_pods_get_exactly_toposched_gpus_in_one_nvlink_domain(self):
        jobs = [Job("train0", 4, "gpu-4", 4, {"tp": 4, "pp": 4}), Job("train1", 3, "gpu-4", 4, {"tp": 4, "pp": 3}),
                Job("pair0", 2, "gpu-2", 2, {"tp": 2, "pp": 2})]
        jobs += [Job(f"solo{i}", 1, "gpu-2" if i % 2 else "gpu-1", 2 if i % 2 else 1) for i in range(6)]
        order = [(j, i) for j in jobs for i in range(j.size)]
        random.Random(7).shuffle(order)
        server = self.start("place")
        for job, index in order:
            self.create_pod(job, index)
        names = [n for j in jobs for n in j.pod_names()]
        pods = self.wait_bound(names)
        status, body = server.request("GET", "/v1/jobs")
        self.assertEqual(status, 200, body)
        held = {j["job"]: j for j in json.loads(body)["jobs"]}
        allocated = []
        for job in jobs:
            self.assertIn(job.job_id(), held, f"{job.job_id()} not held by toposched")
            by_rank = {x["rank"]: x for x in held[job.job_id()]["gpus"]}
            domains = set()
            for slot, name in enumerate(job.pod_names()):
                pod = pods[name]
                node = pod["spec"]["nodeName"]
                gpus = [int(g) for g in pod["metadata"]["annotations"]["toposched.io/gpus"].split(",")]
                self.assertEqual(len(gpus), job.gpus, name)
                block = [by_rank[r] for r in range(slot * job.gpus, (slot + 1) * job.gpus)]
                self.assertEqual([(x["node"], x["gpu"]) for x in block], [(node, g) for g in gpus],
                                 f"{name}: annotations and toposched's job disagree")
                claim = self.claim(name)
                alloc = claim["status"].get("allocation")
                self.assertIsNotNone(alloc, f"{name}: claim not allocated")
                self.assertEqual([r["uid"] for r in claim["status"].get("reservedFor", [])], [pod["metadata"]["uid"]],
                                 f"{name}: claim not reserved for its pod")
                terms = alloc["nodeSelector"]["nodeSelectorTerms"]
                self.assertEqual(terms[0]["matchFields"][0]["values"], [node], f"{name}: claim's node")
                want = [self.devices_in_pci_order(node)[g] for g in gpus]
                got = [(r["driver"], r["pool"], r["device"]) for r in alloc["devices"]["results"]]
                self.assertEqual(got, [(DRIVER, node, d["name"]) for d in want],
                                 f"{name}: allocated devices are not toposched's GPUs {gpus} on {node}")
                allocated += [(node, d["attributes"]["uuid"]["string"]) for d in want]
                domains.add(self.labels[node][DOMAIN_LABEL])
            self.assertEqual(len(domains), 1, f"{job.name} spans NVLink domains {sorted(domains)}")
        self.assertEqual(len(allocated), len(set(allocated)), "a GPU allocated twice")
        self.assertEqual(len(allocated), sum(j.size * j.gpus for j in jobs))

    def test_a_gpu_and_a_nic_on_one_pcie_root(self):
        jobs = [Job(f"gn{i}", 1, "gpu-nic", 1) for i in range(6)]
        self.start("gpu-nic")
        for job in jobs:
            self.create_pod(job, 0)
        names = [n for j in jobs for n in j.pod_names()]
        pods = self.wait_bound(names)
        for name in names:
            node = pods[name]["spec"]["nodeName"]
            gpu = int(pods[name]["metadata"]["annotations"]["toposched.io/gpus"])
            results = self.claim(name)["status"]["allocation"]["devices"]["results"]
            by_request = {r["request"]: r for r in results}
            self.assertEqual(sorted(by_request), ["gpus", "nic"], name)
            want_gpu = self.devices_in_pci_order(node)[gpu]
            self.assertEqual((by_request["gpus"]["driver"], by_request["gpus"]["device"]), (DRIVER, want_gpu["name"]), name)
            root = want_gpu["attributes"]["resource.kubernetes.io/pcieRoot"]["string"]
            self.assertEqual((by_request["nic"]["driver"], by_request["nic"]["pool"], by_request["nic"]["device"]),
                             (NIC_DRIVER, node, f"nic-{ROOTS.index(root)}"),
                             f"{name}: the NIC is not the one on GPU {gpu}'s root {root}")

    def test_a_claim_toposched_cannot_place_leaves_the_pod_unbound_with_the_reason(self):
        self.start("refused")
        self.create_pod(Job("whole", 1, "gpu-all", 0), 0)
        deadline = time.monotonic() + 30
        while "allocationMode All is not placed by toposched" not in self.events():
            self.assertLess(time.monotonic(), deadline, "no event with the reason:\n" + self.events())
            time.sleep(0.3)
        self.assertEqual(self.bound(["whole-0"]), [])
        self.assertIsNone(self.claim("whole-0")["status"].get("allocation"))

    def test_a_dra_group_with_an_unplaceable_member_binds_none_and_its_claims_are_released(self):
        job = Job("permit", 3, "gpu-4", 4, {"tp": 4, "pp": 3})
        server = self.start("permit", permit_wait_s=PERMIT_WAIT_S)
        pods = [job.pod(i) for i in range(job.size)]
        pods[2]["spec"]["nodeSelector"] = {"toposched.io/no-such-node": "true"}
        original = job.pod
        job.pod = lambda i: pods[i]
        for i in range(job.size):
            self.create_pod(job, i)
        job.pod = original
        # The two placeable members are pinned and wait at Permit ...
        deadline = time.monotonic() + 60
        while not all(self.claim(n)["status"].get("allocation") for n in job.pod_names()[:2]):
            self.assertLess(time.monotonic(), deadline, "the placeable members' claims were never pinned:\n"
                            + self.kube.log_tail("kube-scheduler", 40))
            time.sleep(0.1)
        # ... and after the time-out their claims are deallocated (serve's log shows the
        # release; kube-scheduler then retries and may pin them again, so the log, not a poll
        # of the claims, is the witness), and no member is ever bound.
        release = f"release job={job.job_id()} "
        released = False
        unpinned = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (released and len(unpinned) == 2):
            self.assertEqual(self.bound(job.pod_names()), [], "a member of the group was bound")
            for n in job.pod_names()[:2]:
                if not self.claim(n)["status"].get("allocation"):
                    unpinned.add(n)
            with open(server.log_path) as f:
                released = release in f.read()
            time.sleep(0.05)
        self.assertTrue(released, "the group was not released after the Permit time-out")
        self.assertEqual(unpinned, set(job.pod_names()[:2]), "claims of the timed-out members stayed allocated")
        self.assertIn(f"rejected due to timeout after waiting {PERMIT_WAIT_S}s at plugin Toposched", self.events())
        self.assertIsNone(self.claim(job.pod_names()[2])["status"].get("allocation"))
        self.assertEqual(self.bound(job.pod_names()), [])


if __name__ == "__main__":
    unittest.main()
