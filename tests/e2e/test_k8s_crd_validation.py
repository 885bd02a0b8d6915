"""Kubernetes exports validated against the real CRDs of the tools that read them (issue 21).

The CRDs (openAPIV3Schema of the served version) and Volcano's ValidatingAdmissionPolicy are
copied from the projects at the commits listed in tests/data/k8s-crds/README.md. Each export
is checked the way an API server would check it on create:
- the object's schema with python3-jsonschema (OpenAPI v3 keywords; Kubernetes' x- keys are
  annotations there);
- every CEL rule of the schema (x-kubernetes-validations) and of Volcano's admission policy,
  each transcribed below by its exact text: a CRD that gains a rule we have not transcribed
  fails the test, so the check cannot silently go stale. Transition rules (those reading
  oldSelf) apply only to updates and are listed as such;
- metadata.name as the API server checks names (DNS-1123 subdomain), label keys and values
  as Kubernetes does.

Clusters: every preset, specs discovered from the real-format fixtures, and awkward cases
(names with '..' and '.-', 80-character switch names, 70-character node names, a mixed
cluster where some nodes have no NVLink domain and one has no switch, node names Kubernetes
refuses).
"""

import json
import os
import re
import subprocess
import tempfile
import unittest

import jsonschema
import yaml

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
SOURCE_DIR = os.environ.get("TOPOSCHED_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CRDS = os.path.join(SOURCE_DIR, "tests", "data", "k8s-crds")
DISCOVERY = os.path.join(SOURCE_DIR, "tests", "data", "discovery")

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_subdomain(name):
    return 0 < len(name) <= 253 and DNS1123_SUBDOMAIN.match(name) is not None


def is_qualified_name(name):
    """Kubernetes' IsQualifiedName (format.qualifiedName() in CEL): [prefix/]name, name <= 63."""
    prefix, _, part = name.rpartition("/")
    if prefix and not is_subdomain(prefix):
        return False
    return 0 < len(part) <= 63 and QUALIFIED_NAME_PART.match(part) is not None


def is_label_value(v):
    return len(v) <= 63 and LABEL_VALUE.match(v) is not None


# CEL rules of the CRDs, by their exact text: the function checks an object as a create would.
def unique_levels(levels):
    return all(levels.count(x) == 1 for x in levels)


def hostname_last(levels):
    names = [x["nodeLabel"] for x in levels]
    return "kubernetes.io/hostname" not in names or names[-1] == "kubernetes.io/hostname"


def one_selector(member):
    return sum(k in member for k in ("exactMatch", "regexMatch", "labelMatch"))


CEL_RULES = {
    # Kueue Topology (v1beta2, v1beta1, v1alpha1) spec.levels; KAI Topology spec.levels.
    "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0": unique_levels,
    "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0 || self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'": hostname_last,
    # Kueue ResourceFlavor spec.
    "!has(self.topologyName) || self.nodeLabels.size() >= 1": lambda spec: "topologyName" not in spec or len(spec.get("nodeLabels", {})) >= 1,
    # Kueue ResourceFlavor spec.nodeTaints / tolerations (toposched writes none of them).
    "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])": lambda xs: all(x.get("effect") in ("NoSchedule", "PreferNoSchedule", "NoExecute") for x in xs),
    "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)": lambda xs: all("key" in x or x.get("operator") == "Exists" for x in xs),
    "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)": lambda xs: all("tolerationSeconds" not in x or x.get("effect") == "NoExecute" for x in xs),
    "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])": lambda xs: all(x.get("operator", "Equal") in ("Equal", "Exists") for x in xs),
    "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)": lambda xs: all(not (x.get("operator") == "Exists" and "value" in x) for x in xs),
    "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])": lambda xs: all(x.get("effect", "NoSchedule") in ("NoSchedule", "PreferNoSchedule", "NoExecute") for x in xs),
    # Volcano HyperNode spec.members[].selector.
    "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)": lambda sel: one_selector(sel) >= 1,
    "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + (has(self.labelMatch) ? 1 : 0) <= 1": lambda sel: one_selector(sel) <= 1,
}


def normalise(rule):
    return " ".join(rule.split())


CEL = {normalise(k): v for k, v in CEL_RULES.items()}


def is_transition_rule(rule):
    return "oldSelf" in rule


def schema_rules(schema, path=()):
    """Yields (path, rule) for every x-kubernetes-validations entry; path elements are property
    names or '*' for array items / map values."""
    for v in schema.get("x-kubernetes-validations", []):
        yield path, v["rule"]
    for name, sub in schema.get("properties", {}).items():
        yield from schema_rules(sub, path + (name,))
    if "items" in schema:
        yield from schema_rules(schema["items"], path + ("*",))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from schema_rules(schema["additionalProperties"], path + ("*",))


def values_at(obj, path):
    if not path:
        yield obj
        return
    head, rest = path[0], path[1:]
    if head == "*":
        items = obj if isinstance(obj, list) else obj.values() if isinstance(obj, dict) else []
        for x in items:
            yield from values_at(x, rest)
    elif isinstance(obj, dict) and head in obj:
        yield from values_at(obj[head], rest)


def load_crd(filename, version):
    with open(os.path.join(CRDS, filename)) as f:
        crd = yaml.safe_load(f)
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            assert v["served"], f"{filename}: {version} is not served"
            return crd["spec"]["group"], crd["spec"]["names"]["kind"], v["schema"]["openAPIV3Schema"]
    raise AssertionError(f"{filename} has no version {version}")


def check_against_crd(test, doc, filename, version):
    group, kind, schema = load_crd(filename, version)
    test.assertEqual(doc["apiVersion"], f"{group}/{version}")
    test.assertEqual(doc["kind"], kind)
    jsonschema.Draft4Validator(schema).validate(doc)
    name = doc["metadata"]["name"]
    test.assertTrue(is_subdomain(name), f"{kind} name {name!r} is not a DNS-1123 subdomain")
    for path, rule in schema_rules(schema):
        if is_transition_rule(rule):
            continue
        check = CEL.get(normalise(rule))
        test.assertIsNotNone(check, f"{filename} {version}: CEL rule not transcribed in this test: {rule}")
        for value in values_at(doc, path):
            test.assertTrue(check(value), f"{kind} {name}: CEL rule {rule!r} fails at {'.'.join(path)}")


# Volcano's ValidatingAdmissionPolicy for HyperNodes, transcribed rule by rule (messages as
# the policy gives them; the test checks the policy still has exactly these).
def volcano_admission_errors(doc):
    members = doc.get("spec", {}).get("members") or []
    errors = []
    if not members:
        errors.append("member must have at least one member")
    for m in members:
        sel = m.get("selector", {})
        if one_selector(sel) < 1:
            errors.append("member selector must have one of exactMatch, regexMatch, or labelMatch")
        if one_selector(sel) > 1:
            errors.append("cannot specify more than one selector type (exactMatch, regexMatch, labelMatch)")
        if "exactMatch" in sel:
            name = sel["exactMatch"].get("name", "")
            if name == "":
                errors.append("member exactMatch name is required")
            elif not is_qualified_name(name):
                errors.append("member exactMatch validate failed")
        if "regexMatch" in sel:
            pattern = sel["regexMatch"].get("pattern", "")
            if pattern == "":
                errors.append("member regexMatch pattern is required")
            for o, c, what in (("(", ")", "parentheses"), ("[", "]", "square brackets"), ("{", "}", "curly braces")):
                if o in pattern and pattern.count(o) != pattern.count(c):
                    errors.append(f"member regexMatch pattern is invalid: unmatched {what}")
    return errors


VOLCANO_POLICY_MESSAGES = [
    "member must have at least one member",
    "member selector must have one of exactMatch, regexMatch, or labelMatch",
    "cannot specify more than one selector type (exactMatch, regexMatch, labelMatch)",
    "member exactMatch name is required",
    "member exactMatch validate failed [name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character]",
    "member regexMatch pattern is required",
    "member regexMatch pattern is invalid: unmatched parentheses",
    "member regexMatch pattern is invalid: unmatched square brackets",
    "member regexMatch pattern is invalid: unmatched curly braces",
]


def toposched(*args):
    return subprocess.run([TOPOSCHED, *args], capture_output=True, text=True, timeout=300)


def export_docs(test, spec, fmt, *extra):
    r = toposched("export", "--cluster", spec, "--to", fmt, *extra)
    test.assertEqual(r.returncode, 0, f"export {spec} --to {fmt}: {r.stderr}")
    return [d for d in yaml.safe_load_all(r.stdout) if d is not None], r.stderr


def presets():
    r = toposched("presets", "--format", "json")
    assert r.returncode == 0, r.stderr
    return ["preset:" + p["name"] for p in json.loads(r.stdout)]


AWKWARD_SPEC = """\
version: 1
name: "Dots..In.-Name."
node_types:
  - {name: h100, gpu: {model: H100-SXM5, count: 8}, nvlink: {links: 18, nvswitch: true}}
  - {name: gb200-tray, gpu: {model: GB200, count: 4}, nvlink: {links: 18}}
nodes:
  - {names: "%(long_node)s", type: h100}
  - {names: "gb-r1-n[1-2]", type: gb200-tray}
  - {names: "loner", type: h100}
fabric:
  tiers:
    - {name: leaf}
    - {name: spine}
  switches:
    - {name: "%(long_switch)s", tier: leaf, nodes: "%(long_node)s"}
    - {name: "sw..a", tier: leaf, nodes: "gb-r1-n[1-2]"}
    - {name: "spine.-1", tier: spine, switches: ["%(long_switch)s", "sw..a"]}
accelerator_domains:
  - {name: "NVL..r1", nodes: "gb-r1-n[1-2]"}
""" % {"long_node": "n" * 69 + "1", "long_switch": "leaf-" + "s" * 75}

BAD_NODE_NAMES_SPEC = """\
version: 1
name: bad-node-names
node_types:
  - {name: h100, gpu: {model: H100-SXM5, count: 8}, nvlink: {links: 18, nvswitch: true}}
nodes:
  - {names: "GPU-A01", type: h100}
  - {names: "gpu_b01", type: h100}
fabric:
  tiers: [{name: leaf}]
  switches:
    - {name: leaf-1, tier: leaf, nodes: "GPU-A01,gpu_b01"}
"""


class K8sCrdValidation(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="toposched-crd-")
        d = cls.tmp.name
        with open(os.path.join(d, "awkward.yaml"), "w") as f:
            f.write(AWKWARD_SPEC)
        with open(os.path.join(d, "bad-names.yaml"), "w") as f:
            f.write(BAD_NODE_NAMES_SPEC)
        cls.discovered = []
        for name, args in (
            ("ibnet", ["--ibnetdiscover", os.path.join(DISCOVERY, "two-su-rails-storage.ibnet")]),
            ("topo-and-fabric", ["--topo-m", os.path.join(DISCOVERY, "h100-hgx-13nic.topo"),
                                 "--topo-m", os.path.join(DISCOVERY, "gb200-4gpu.topo")]),
            ("slurm", ["--slurm-topology", os.path.join(DISCOVERY, "slurm-tree.conf")]),
            ("topograph", ["--topograph-model", os.path.join(DISCOVERY, "topograph-model.yaml")]),
            ("k8s-nodes", ["--k8s-nodes", os.path.join(DISCOVERY, "k8s-nodes.json")]),
            ("gcp", ["--gcp-instances", os.path.join(DISCOVERY, "gcp-instances.json")]),
            ("oci", ["--oci-rdma-topology", os.path.join(DISCOVERY, "oci-rdma"),
                     "--oci-rdma-topology", os.path.join(DISCOVERY, "oci-rdma-pdsh.txt")]),
        ):
            out = os.path.join(d, f"discovered-{name}.yaml")
            r = toposched("discover", *args, "-o", out)
            assert r.returncode == 0, f"discover {name}: {r.stderr}"
            cls.discovered.append(out)
        cls.specs = presets() + cls.discovered + [os.path.join(SOURCE_DIR, "examples", "cluster-small.yaml"),
                                                  os.path.join(d, "awkward.yaml")]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_volcano_policy_is_the_one_transcribed(self):
        with open(os.path.join(CRDS, "volcano-hypernodes-validating.yaml")) as f:
            policy = next(d for d in yaml.safe_load_all(f) if d["kind"] == "ValidatingAdmissionPolicy")
        self.assertEqual([v["message"] for v in policy["spec"]["validations"]], VOLCANO_POLICY_MESSAGES)

    def test_kueue_current_and_v0_19(self):
        for spec in self.specs:
            for crds in ("kueue-main", "kueue-v0.19.2"):
                with self.subTest(spec=spec, crds=crds):
                    docs, _ = export_docs(self, spec, "kueue")
                    check_against_crd(self, docs[0], f"{crds}-topologies.yaml", "v1beta2")
                    for flavor in docs[1:]:
                        check_against_crd(self, flavor, f"{crds}-resourceflavors.yaml", "v1beta2")
                        for k, v in flavor["spec"]["nodeLabels"].items():
                            self.assertTrue(is_qualified_name(k) and is_label_value(v), (k, v))

    def test_kueue_older_apis(self):
        for spec in self.specs:
            with self.subTest(spec=spec, version="v1beta1"):
                docs, _ = export_docs(self, spec, "kueue", "--kueue-version", "v1beta1")
                check_against_crd(self, docs[0], "kueue-v0.19.2-topologies.yaml", "v1beta1")
                for flavor in docs[1:]:
                    check_against_crd(self, flavor, "kueue-v0.19.2-resourceflavors.yaml", "v1beta1")
            with self.subTest(spec=spec, version="v1alpha1"):
                docs, _ = export_docs(self, spec, "kueue", "--kueue-version", "v1alpha1")
                check_against_crd(self, docs[0], "kueue-v0.13.9-topologies.yaml", "v1alpha1")
                for flavor in docs[1:]:
                    check_against_crd(self, flavor, "kueue-v0.13.9-resourceflavors.yaml", "v1beta1")

    def test_kai(self):
        for spec in self.specs:
            with self.subTest(spec=spec):
                docs, _ = export_docs(self, spec, "kai")
                self.assertEqual(len(docs), 1)
                check_against_crd(self, docs[0], "kai-topologies.yaml", "v1alpha1")

    def test_volcano_schema_and_admission_policy(self):
        for spec in self.specs:
            for members in ("exact", "regex"):
                with self.subTest(spec=spec, members=members):
                    docs, _ = export_docs(self, spec, "volcano", "--members", members)
                    names = {d["metadata"]["name"] for d in docs}
                    for d in docs:
                        check_against_crd(self, d, "volcano-hypernodes.yaml", "v1alpha1")
                        self.assertEqual(volcano_admission_errors(d), [], d["metadata"]["name"])
                        for m in d["spec"]["members"]:
                            if m["type"] == "HyperNode":
                                self.assertIn(m["selector"]["exactMatch"]["name"], names)

    def test_nfd(self):
        """NodeFeature and NodeFeatureGroup against NFD's CRDs; every object in the one
        namespace, every group's rule matching the value its annotations name."""
        awkward = os.path.join(self.tmp.name, "awkward.yaml")
        r = toposched("export", "--cluster", awkward, "--to", "nfd")
        # Its 70-character node name cannot be NFD's node-name label value (Topograph refuses it too).
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("cannot be the label value nfd.node.kubernetes.io/node-name (at most 63 characters)", r.stderr)
        self.assertEqual(r.stdout, "")
        for spec in self.specs:
            if spec == awkward:
                continue
            with self.subTest(spec=spec):
                docs, _ = export_docs(self, spec, "nfd", "--namespace", "nfd-system")
                self.assertTrue(docs)
                for d in docs:
                    crd = "nfd-nodefeatures.yaml" if d["kind"] == "NodeFeature" else "nfd-nodefeaturegroups.yaml"
                    check_against_crd(self, d, crd, "v1alpha1")
                    self.assertEqual(d["metadata"]["namespace"], "nfd-system")
                    self.assertLessEqual(len(d["metadata"]["name"]), 63)
                    if d["kind"] == "NodeFeatureGroup":
                        kind = d["metadata"]["labels"]["topograph.run/group-type"]
                        value = d["metadata"]["annotations"]["topograph.run/label-value"]
                        [feature] = d["spec"]["featureGroupRules"][0]["matchFeatures"]
                        self.assertEqual(feature["matchExpressions"], {kind: {"op": "In", "value": [value]}})

    def test_levels_cover_every_node(self):
        """Every node carries every level label of the Kueue/KAI topology (none is left out)."""
        for spec in self.specs:
            with self.subTest(spec=spec):
                topo, _ = export_docs(self, spec, "kueue")
                levels = [l["nodeLabel"] for l in topo[0]["spec"]["levels"] if l["nodeLabel"] != "kubernetes.io/hostname"]
                r = toposched("export", "--cluster", spec, "--to", "k8s-labels", "--style", "patch")
                self.assertEqual(r.returncode, 0, r.stderr)
                for node, patch in json.loads(r.stdout).items():
                    self.assertTrue(is_subdomain(node), node)
                    labels = patch["metadata"]["labels"]
                    self.assertEqual([l for l in levels if l not in labels], [], f"{node} lacks level labels")
                    for k, v in labels.items():
                        self.assertTrue(is_qualified_name(k) and is_label_value(v), (k, v))

    def test_awkward_names(self):
        spec = os.path.join(self.tmp.name, "awkward.yaml")
        docs, _ = export_docs(self, spec, "kueue")
        self.assertEqual(docs[0]["metadata"]["name"], "dots.in.name")
        self.assertEqual(docs[1]["spec"]["topologyName"], "dots.in.name")
        hyper, err = export_docs(self, spec, "volcano")
        names = sorted(d["metadata"]["name"] for d in hyper)
        self.assertIn("sw.a", names)
        self.assertIn("spine.1", names)
        self.assertTrue(all(len(n) <= 63 for n in names), names)
        long_leaf = [n for n in names if n.startswith("leaf-")]
        self.assertEqual(len(long_leaf), 1)
        self.assertRegex(long_leaf[0], r"-[0-9a-f]{8}$")
        self.assertIn("longer than the 63 characters", err)
        self.assertIn("under no switch and in no accelerator domain", err)
        self.assertIn("loner", err)
        # The long node is matched by an anchored regex of its own name.
        leaf = next(d for d in hyper if d["metadata"]["name"] == long_leaf[0])
        pattern = leaf["spec"]["members"][0]["selector"]["regexMatch"]["pattern"]
        self.assertRegex("n" * 69 + "1", pattern)
        self.assertNotRegex("n" * 69 + "12", pattern)
        # Mixed: the domain level, which some nodes lack, is left out of the levels, with a warning
        # naming those nodes, so that Kueue and KAI keep every node.
        kai, err = export_docs(self, spec, "kai")
        self.assertNotIn("accelerator.topograph.run/domain", [l["nodeLabel"] for l in kai[0]["spec"]["levels"]])
        self.assertIn("level accelerator.topograph.run/domain is left out", err)
        self.assertIn("loner", err)

    def test_node_names_kubernetes_refuses(self):
        spec = os.path.join(self.tmp.name, "bad-names.yaml")
        for fmt in ("k8s-labels", "volcano"):
            with self.subTest(fmt=fmt):
                r = toposched("export", "--cluster", spec, "--to", fmt)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("'GPU-A01' is not a valid Kubernetes node name", r.stderr)
                self.assertIn("--k8s-node-name-map", r.stderr)
                self.assertEqual(r.stdout, "")
        names = os.path.join(self.tmp.name, "names.yaml")
        with open(names, "w") as f:
            f.write("GPU-A01: gpu-a01\ngpu_b01: gpu-b01\n")
        r = toposched("export", "--cluster", spec, "--to", "k8s-labels", "--k8s-node-name-map", names)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kubectl label node gpu-a01 ", r.stdout)
        self.assertIn("kubectl label node gpu-b01 ", r.stdout)
        docs, _ = export_docs(self, spec, "volcano", "--k8s-node-name-map", names)
        self.assertEqual(sorted(m["selector"]["exactMatch"]["name"] for m in docs[0]["spec"]["members"]), ["gpu-a01", "gpu-b01"])
        with open(names, "w") as f:
            f.write("GPU-A01: Not_Valid\n")
        r = toposched("export", "--cluster", spec, "--to", "volcano", "--k8s-node-name-map", names)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"{names}:1:10", r.stderr)


# The peers' workload objects shown in docs/export.md (a KAI PodGroup with subGroups, a Volcano
# PodGroup with highestTierName and a subGroupPolicy): each follows a marker
# `<!-- crd-example: CRD-FILE VERSION SPEC EXPORT -->` naming the CRD it must pass and the
# cluster and export whose level names it uses.
CRD_EXAMPLE = re.compile(r"^<!--\s*crd-example:\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*-->\s*$")


def documented_crd_examples():
    """[(crd file, version, cluster spec, export format, object, line)] from docs/export.md."""
    with open(os.path.join(SOURCE_DIR, "docs", "export.md"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    out = []
    for i, line in enumerate(lines):
        m = CRD_EXAMPLE.match(line)
        if not m:
            continue
        assert lines[i + 1] == "```yaml", f"docs/export.md:{i + 2}: a ```yaml block must follow the crd-example marker"
        end = lines.index("```", i + 2)
        out.append((*m.groups(), yaml.safe_load("\n".join(lines[i + 2:end])), i + 1))
    return out


def pruned_fields(obj, schema, path=""):
    """The fields the API server would drop as unknown (structural pruning): keys of an object
    whose schema lists properties, allows no others and does not preserve unknown fields."""
    if isinstance(obj, dict) and "properties" in schema:
        keep_all = schema.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in schema
        for key, value in obj.items():
            if key in schema["properties"]:
                yield from pruned_fields(value, schema["properties"][key], f"{path}.{key}")
            elif not keep_all:
                yield f"{path}.{key}"
    elif isinstance(obj, list) and "items" in schema:
        for k, value in enumerate(obj):
            yield from pruned_fields(value, schema["items"], f"{path}[{k}]")


def kai_subgroup_errors(subgroups):
    """KAI's PodGroup admission webhook (pkg/apis/scheduling/v2alpha2/podgroup_webhook.go,
    validateSubGroups), transcribed: unique names, every parent exists, no cycle."""
    names = [g["name"] for g in subgroups]
    errors = [f"duplicate subgroup name {n}" for n in sorted(set(names)) if names.count(n) > 1]
    parent = {g["name"]: g.get("parent") for g in subgroups}
    errors += [f"parent {p} of {n} was not found" for n, p in parent.items() if p is not None and p not in parent]
    for start in parent:
        seen, at = set(), start
        while at is not None and at in parent and at not in seen:
            seen.add(at)
            at = parent[at]
        if at in seen:
            errors.append("cycle detected in subgroups")
            break
    return errors


class PeerWorkloadExamples(unittest.TestCase):
    """The KAI and Volcano PodGroups of docs/export.md pass their CRDs (nothing pruned) and
    their admission rules, and name only levels the export of their cluster writes."""

    def setUp(self):
        self.examples = documented_crd_examples()
        self.assertEqual(sorted((e[0], e[3]) for e in self.examples),
                         [("kai-podgroups.yaml", "kai"), ("volcano-podgroups.yaml", "volcano")])

    def test_examples_pass_the_crds_without_a_pruned_field(self):
        for crd, version, _, _, obj, line in self.examples:
            with self.subTest(line=line):
                check_against_crd(self, obj, crd, version)
                self.assertEqual(list(pruned_fields(obj, load_crd(crd, version)[2])), [])

    def test_pruning_check_finds_kai_docs_spelling(self):
        """KAI's docs/topology/multilevel.md writes `subgroups`; the CRD's field is `subGroups`."""
        (obj,) = [e[4] for e in self.examples if e[3] == "kai"]
        misspelt = json.loads(json.dumps(obj))
        misspelt["spec"]["subgroups"] = misspelt["spec"].pop("subGroups")
        self.assertEqual(list(pruned_fields(misspelt, load_crd("kai-podgroups.yaml", "v2alpha2")[2])), [".spec.subgroups"])

    def test_kai_levels_are_the_exported_topologys(self):
        (spec, obj) = [(e[2], e[4]) for e in self.examples if e[3] == "kai"][0]
        docs, _ = export_docs(self, spec, "kai")
        topology = docs[0]
        levels = {x["nodeLabel"] for x in topology["spec"]["levels"]}
        subgroups = obj["spec"].get("subGroups", [])
        self.assertGreaterEqual(len(subgroups), 2)
        self.assertEqual(kai_subgroup_errors(subgroups), [])
        for constraint in [obj["spec"]["topologyConstraint"]] + [g["topologyConstraint"] for g in subgroups]:
            self.assertEqual(constraint["topology"], topology["metadata"]["name"])
            for key in ("requiredTopologyLevel", "preferredTopologyLevel"):
                if key in constraint:
                    self.assertIn(constraint[key], levels)
        # The transcribed webhook rules do refuse what KAI refuses.
        self.assertEqual(kai_subgroup_errors([{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]),
                         ["cycle detected in subgroups"])
        self.assertEqual(kai_subgroup_errors([{"name": "a", "parent": "x"}, {"name": "a", "parent": "x"}]),
                         ["duplicate subgroup name a", "parent x of a was not found"])

    def test_volcano_tier_names_are_the_exported_hypernodes(self):
        (spec, obj) = [(e[2], e[4]) for e in self.examples if e[3] == "volcano"][0]
        docs, _ = export_docs(self, spec, "volcano")
        tier_of_name = {d["spec"]["tierName"]: d["spec"]["tier"] for d in docs}
        topologies = [obj["spec"]["networkTopology"]] + [p["networkTopology"] for p in obj["spec"]["subGroupPolicy"]]
        for nt in topologies:
            # Volcano's job webhook (admit_job.go): "must not specify 'highestTierAllowed' and
            # 'highestTierName' in networkTopology simultaneously".
            self.assertFalse("highestTierAllowed" in nt and "highestTierName" in nt, nt)
            self.assertIn(nt["highestTierName"], tier_of_name)
        # A partition stays in a tier below the whole group's.
        self.assertLess(tier_of_name[topologies[1]["highestTierName"]], tier_of_name[topologies[0]["highestTierName"]])


if __name__ == "__main__":
    unittest.main()
