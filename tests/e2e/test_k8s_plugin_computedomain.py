"""The plugin build with NVIDIA ComputeDomains (issue 31, "ComputeDomains"): the pods of one
ComputeDomain land in one NVLink domain (one GB200 NVL72 rack) where one can hold them.

The real control plane of test_k8s_kube_scheduler.py (kube-apiserver and
toposched-kube-scheduler v1.37.2 with deploy/kubernetes/scheduler-plugin-config.yaml's
profile) and 54 fake GB200 trays in three NVL72 racks (`preset:gb200-nvl72?racks=3`, 4
nvidia.com/gpu each, 18 trays per NVLink domain). What NVIDIA's DRA driver
(dra-driver-nvidia-gpu) would install is created by the test, from its documented API, not
its code:
- a CustomResourceDefinition of our own for `computedomains.resource.nvidia.com` (v1beta1,
  the fields the plugin reads: spec.channel.resourceClaimTemplate.name, and numNodes and
  allocationMode as the driver's API has them);
- the DeviceClass compute-domain-default-channel.nvidia.com (the driver's selector: a device
  of driver compute-domain.nvidia.com of type channel and id 0) and, per node, the slice the
  driver's kubelet plugin publishes with that channel device;
- per ComputeDomain, the ResourceClaimTemplate its controller creates (named by the
  ComputeDomain's spec.channel.resourceClaimTemplate.name: one request of the channel class,
  the opaque channel config naming the domain's UID);
- and, as kube-controller-manager's resourceclaim controller, each pod's channel claim from
  the template (owned by the pod, named in its status).

Pods ask for their GPUs as nvidia.com/gpu (the device plugin) and for the IMEX channel
through the claim, as NVIDIA's multi-node examples do. The racks are first partly filled
(fillers pinned to nodes by nodeSelector, placed by the plugin), so that the rack a
placement pod by pod would start in (the fullest one that takes a pod) cannot hold the job.

Asserted, read back from the API server:
- a ComputeDomain job of pods without any gang (an MPIJob's workers; held by a scheduling
  gate until all exist, as Kueue admits a job) is bound whole in one rack, the only one with
  room for all its pods, and each pod's channel claim is allocated on the pod's node;
- a ComputeDomain gang (coscheduling labels) is bound whole in one rack;
- the scheduler's log says it planned the members domain by domain.

build/kube/toposched-kube-scheduler comes from scripts/build-kube (make test builds it): a
machine without it fails these tests, it does not skip them.
"""

import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k8s_harness import SCHEDULER_NAME, ControlPlane, topology_labels  # noqa: E402
from serve_harness import Server  # noqa: E402

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
CLUSTER = "preset:gb200-nvl72?racks=3"
PREFIX = "/toposched"
NAMESPACE = "ml"
DOMAIN_LABEL = "accelerator.topograph.run/domain"
RESOURCE = "/apis/resource.k8s.io/v1"
CD_API = "/apis/resource.nvidia.com/v1beta1"
CD_DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
GATE = "toposched.io/test-hold"
WAIT_S = 180

# Our own minimal CRD: the fields of NVIDIA's ComputeDomain v1beta1 the plugin and the test use.
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "computedomains.resource.nvidia.com"},
    "spec": {
        "group": "resource.nvidia.com", "scope": "Namespaced",
        "names": {"kind": "ComputeDomain", "listKind": "ComputeDomainList", "plural": "computedomains",
                  "singular": "computedomain"},
        "versions": [{
            "name": "v1beta1", "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "required": ["channel"], "properties": {
                    "numNodes": {"type": "integer", "minimum": 0},
                    "channel": {"type": "object", "required": ["resourceClaimTemplate"], "properties": {
                        "resourceClaimTemplate": {"type": "object", "required": ["name"],
                                                  "properties": {"name": {"type": "string"}}},
                        "allocationMode": {"type": "string", "enum": ["All", "Single"]}}}}},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}},
        }],
    },
}

CHANNEL_DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CHANNEL_CLASS},
    "spec": {"selectors": [{"cel": {"expression":
                                    f"device.driver == '{CD_DRIVER}' && "
                                    f"device.attributes['{CD_DRIVER}'].type == 'channel' && "
                                    f"device.attributes['{CD_DRIVER}'].id == 0"}}]},
}


def channel_slice(node):
    """The compute-domain kubelet plugin's slice for a node: the channel device (and a daemon
    device, which no claim here asks for)."""
    def device(name, kind):
        return {"name": name, "attributes": {"type": {"string": kind}, "id": {"int": 0}}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{CD_DRIVER}"},
            "spec": {"driver": CD_DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [device("channel-0", "channel"), device("daemon-0", "daemon")]}}


def compute_domain(name):
    return {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": f"{name}-channel"},
                                                "allocationMode": "Single"}}}


def channel_template(cd):
    """The ResourceClaimTemplate the ComputeDomain controller creates for `cd` (as created)."""
    name = cd["spec"]["channel"]["resourceClaimTemplate"]["name"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {"resource.nvidia.com/computeDomain": cd["metadata"]["uid"]}},
            "spec": {"spec": {"devices": {
                "requests": [{"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}}],
                "config": [{"requests": ["channel"], "opaque": {"driver": CD_DRIVER, "parameters": {
                    "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
                    "domainID": cd["metadata"]["uid"]}}}]}}}}


def pod(name, gpus, template=None, labels=None, annotations=None, node_selector=None, gated=False):
    resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": resources, "limits": resources}}
    spec = {"schedulerName": SCHEDULER_NAME, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "containers": [container]}
    if template:
        spec["resourceClaims"] = [{"name": "channel", "resourceClaimTemplateName": template}]
        container["resources"]["claims"] = [{"name": "channel"}]
    if node_selector:
        spec["nodeSelector"] = node_selector
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": spec}


def crd_established(crd):
    """Whether the CRD's Established condition is True. Just after the create the API server
    answers `status.conditions: null` (found in the suite, 2026-12-07), not an empty list."""
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


class PluginBuildComputeDomains(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="toposched-k8s-cd-")
        cls.kube = ControlPlane()  # raises (the test fails) when the binaries are missing
        cls.kube.start()
        k = cls.kube
        cls.labels = topology_labels(TOPOSCHED, CLUSTER)
        k.add_nodes(sorted(cls.labels.items()), gpus=4)
        k.ensure_namespace(NAMESPACE)
        k.api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
        deadline = time.monotonic() + 120
        while not crd_established(k.api.get(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/computedomains.resource.nvidia.com")):
            assert time.monotonic() < deadline, "the ComputeDomain CRD was never Established"
            time.sleep(0.2)
        k.api.create(f"{RESOURCE}/deviceclasses", CHANNEL_DEVICE_CLASS)
        for node in sorted(cls.labels):
            k.api.create(f"{RESOURCE}/resourceslices", channel_slice(node))
        cls.cds = {}
        for name in ("imex-a", "imex-b"):
            cd = k.api.create(f"{CD_API}/namespaces/{NAMESPACE}/computedomains", compute_domain(name))
            k.api.create(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaimtemplates", channel_template(cd))
            cls.cds[name] = cd
        # The racks, by domain label value, and their trays in name order.
        cls.racks = {}
        for node, labels in sorted(cls.labels.items()):
            cls.racks.setdefault(labels[DOMAIN_LABEL], []).append(node)
        assert len(cls.racks) == 3 and all(len(v) == 18 for v in cls.racks.values()), cls.racks
        # The plugin reads ComputeDomains when it starts (the CRD is served by now).
        cls.server = Server(CLUSTER, f"sqlite:{cls.tmp.name}/serve.db", cls.tmp.name,
                            ["--k8s-extender", "--url-prefix", PREFIX, "--k8s-api", k.url(),
                             "--k8s-token-file", k.token_file, "--k8s-ca-file", k.ca_file])
        k.start_scheduler(f"{cls.server.url()}{PREFIX}", True, plugin=True)

    @classmethod
    def tearDownClass(cls):
        cls.kube.stop_scheduler()
        cls.server.stop()
        cls.kube.stop()
        cls.tmp.cleanup()

    def create(self, p):
        """Creates the pod and, when it names a channel template, its claim from the template
        (owned by the pod, recorded in its status), as the resourceclaim controller does."""
        created = self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", p)
        claims = p["spec"].get("resourceClaims", [])
        for pc in claims:
            name = f"{p['metadata']['name']}-{pc['name']}"
            template = self.kube.api.get(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaimtemplates/"
                                         f"{pc['resourceClaimTemplateName']}")
            self.kube.api.create(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims", {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": NAMESPACE,
                             "annotations": {"resource.kubernetes.io/pod-claim-name": pc["name"]},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"],
                                                  "uid": created["metadata"]["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]},
                "spec": template["spec"]["spec"]})
            self.kube.api.ok("PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{p['metadata']['name']}/status",
                             {"status": {"resourceClaimStatuses": [{"name": pc["name"], "resourceClaimName": name}]}},
                             "application/merge-patch+json")

    def wait_bound(self, names):
        pods, unbound = self.kube.wait_bound(NAMESPACE, names, WAIT_S)
        if unbound:
            self.fail(f"{len(unbound)} pods not bound after {WAIT_S} s, e.g. {unbound[:5]}:\n"
                      + self.kube.log_tail("kube-scheduler", 40))
        return pods

    def rack_of(self, node):
        return self.labels[node][DOMAIN_LABEL]

    def assert_channels_on_their_nodes(self, pods, names):
        for n in names:
            claim = self.kube.api.get(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims/{n}-channel")
            alloc = claim["status"].get("allocation")
            self.assertIsNotNone(alloc, f"{n}: channel claim not allocated")
            node = pods[n]["spec"]["nodeName"]
            self.assertEqual(alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"], [node], n)
            self.assertEqual([(r["driver"], r["pool"], r["device"]) for r in alloc["devices"]["results"]],
                             [(CD_DRIVER, node, "channel-0")], n)

    def test_a_compute_domain_lands_in_one_rack(self):
        racks = sorted(self.racks)
        # Fillers: 12 trays of the first rack, 4 of the second, 8 of the third taken, leaving
        # 6, 14 and 10 trays free; the ComputeDomain job below needs 12.
        fill = {racks[0]: 12, racks[1]: 4, racks[2]: 8}
        fillers = []
        for rack, n in fill.items():
            for node in self.racks[rack][:n]:
                name = f"fill-{node}"[:63]
                self.create(pod(name, 4, node_selector={"kubernetes.io/hostname": node}))
                fillers.append(name)
        self.wait_bound(fillers)

        # Job A: 12 workers of one ComputeDomain, no gang, held by a scheduling gate until
        # all exist, then released one by one.
        a = [f"imex-a-{i}" for i in range(12)]
        for n in a:
            self.create(pod(n, 4, template="imex-a-channel", gated=True))
        for n in a:
            self.kube.api.ok("PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{n}",
                             {"spec": {"schedulingGates": None}}, "application/merge-patch+json")
        pods = self.wait_bound(a)
        used = {self.rack_of(pods[n]["spec"]["nodeName"]) for n in a}
        self.assertEqual(used, {racks[1]}, f"ComputeDomain imex-a spans racks {sorted(used)}; only {racks[1]} "
                         f"had room for its 12 trays")
        self.assertEqual(len({pods[n]["spec"]["nodeName"] for n in a}), 12, "two workers on one tray")
        self.assert_channels_on_their_nodes(pods, a)

        # Job B: a gang of 8 trays (coscheduling labels): only the third rack (10 free) holds it.
        b = [f"imex-b-{i}" for i in range(8)]
        for i, n in enumerate(b):
            self.create(pod(n, 4, template="imex-b-channel",
                            labels={"scheduling.x-k8s.io/pod-group": "imex-b",
                                    "batch.kubernetes.io/job-completion-index": str(i)},
                            annotations={"scheduling.x-k8s.io/min-member": "8", "toposched.io/tp": "4",
                                         "toposched.io/pp": "8"}))
        pods = self.wait_bound(b)
        used = {self.rack_of(pods[n]["spec"]["nodeName"]) for n in b}
        self.assertEqual(used, {racks[2]}, f"ComputeDomain imex-b spans racks {sorted(used)}")
        self.assert_channels_on_their_nodes(pods, b)

        with open(os.path.join(self.kube.dir, "kube-scheduler.log"), errors="replace") as f:
            log = f.read()
        self.assertIn("toposched reads ComputeDomains", log)
        self.assertIn('"toposched planned a ComputeDomain member in one NVLink domain" pod="ml/imex-a-', log)


if __name__ == "__main__":
    unittest.main()
