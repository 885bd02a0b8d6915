"""deploy/kubernetes/ is consistent with the extender (a fast check without a cluster; a real
kube-apiserver applies every file in test_k8s_apiserver_exports.py): every file parses as YAML, the
KubeSchedulerConfiguration points at the Service and prefix toposched serves, with
percentageOfNodesToScore 100 and the four verbs toposched implements, and the toposched
container's arguments are accepted by `toposched serve --help`."""

import os
import subprocess
import unittest

import yaml

SOURCE = os.environ.get("TOPOSCHED_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
DEPLOY = os.path.join(SOURCE, "deploy", "kubernetes")


def load(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


class DeployManifests(unittest.TestCase):
    def test_every_manifest_parses_and_has_kind(self):
        for name in sorted(os.listdir(DEPLOY)):
            if name.endswith(".yaml"):
                for doc in load(name):
                    self.assertIn("kind", doc, name)
                    self.assertIn("apiVersion", doc, name)

    def test_scheduler_configuration_matches_the_service(self):
        cm = load("scheduler-config.yaml")[0]
        cfg = yaml.safe_load(cm["data"]["config.yaml"])
        self.assertEqual(cfg["kind"], "KubeSchedulerConfiguration")
        self.assertEqual(cfg["percentageOfNodesToScore"], 100)
        ext = cfg["extenders"][0]
        for verb in ("filter", "prioritize", "bind", "preempt"):
            self.assertEqual(ext[f"{verb}Verb"], verb)
        self.assertTrue(ext["nodeCacheCapable"])
        self.assertEqual(ext["managedResources"][0]["name"], "nvidia.com/gpu")
        deployment, _, service = load("toposched.yaml")
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        prefix = next(a.split("=", 1)[1] for a in args if a.startswith("--url-prefix="))
        port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "extender")
        listen = next(a.split("=", 1)[1] for a in args if a.startswith("--extender-listen="))
        self.assertEqual(int(listen.rsplit(":", 1)[1]), port)
        self.assertEqual(ext["urlPrefix"],
                         f"http://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:{port}{prefix}")
        self.assertIn("--k8s-extender", args)
        help_text = subprocess.run([TOPOSCHED, "serve", "--help"], capture_output=True, text=True).stdout
        for a in args:
            if a.startswith("--"):
                self.assertIn(a.split("=", 1)[0], help_text)

    def test_only_the_scheduler_pods_reach_the_tokenless_extender_port(self):
        deployment, _, service = load("toposched.yaml")
        extender = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "extender")
        scheduler = load("kube-scheduler.yaml")[0]
        scheduler_labels = scheduler["spec"]["template"]["metadata"]["labels"]
        policy = load("networkpolicy.yaml")[0]
        self.assertEqual(policy["kind"], "NetworkPolicy")
        self.assertEqual(policy["spec"]["podSelector"]["matchLabels"],
                         deployment["spec"]["template"]["metadata"]["labels"])
        rules = [r for r in policy["spec"]["ingress"] if any(p["port"] == extender for p in r["ports"])]
        self.assertEqual(len(rules), 1, rules)
        self.assertEqual(rules[0]["from"], [{"podSelector": {"matchLabels": scheduler_labels}}])

    def test_plugin_build_configuration_matches_the_service_and_the_extender_profile(self):
        """The plugin build (kube-scheduler-plugin.yaml) replaces the extender's scheduler:
        the same profile name, labels and service account, and its Toposched plugin calls
        the same address and prefix as the extender's urlPrefix; Toposched binds before
        DefaultBinder (pods without GPUs)."""
        ext_cfg = yaml.safe_load(load("scheduler-config.yaml")[0]["data"]["config.yaml"])
        cfg = yaml.safe_load(load("scheduler-plugin-config.yaml")[0]["data"]["config.yaml"])
        self.assertEqual(cfg["kind"], "KubeSchedulerConfiguration")
        profile = cfg["profiles"][0]
        self.assertEqual(profile["schedulerName"], ext_cfg["profiles"][0]["schedulerName"])
        self.assertNotIn("extenders", cfg)
        args = next(pc["args"] for pc in profile["pluginConfig"] if pc["name"] == "Toposched")
        self.assertEqual(args["url"], ext_cfg["extenders"][0]["urlPrefix"])
        plugins = profile["plugins"]
        for point in ("preFilter", "reserve", "permit", "podGroupPostFilter"):
            self.assertIn({"name": "Toposched"}, plugins[point]["enabled"], point)
        self.assertEqual(plugins["bind"]["enabled"], [{"name": "Toposched"}, {"name": "DefaultBinder"}])
        # DRA: Toposched pins the claims before DynamicResources' PreFilter reads them.
        self.assertEqual(plugins["preFilter"]["enabled"], [{"name": "Toposched"}, {"name": "DynamicResources"}])
        self.assertEqual(plugins["preFilter"]["disabled"], [{"name": "DynamicResources"}])
        self.assertEqual(plugins["bind"]["disabled"], [{"name": "DefaultBinder"}])
        # Native PodGroups: Toposched's PodGroupPostFilter releases a failed group's plan;
        # DefaultPreemption's group preemption (on kube-scheduler's GPU counts) is off.
        self.assertEqual(plugins["podGroupPostFilter"], {"disabled": [{"name": "DefaultPreemption"}],
                                                         "enabled": [{"name": "Toposched"}]})
        plugin_dep = load("kube-scheduler-plugin.yaml")[0]
        ext_dep = load("kube-scheduler.yaml")[0]
        self.assertEqual(plugin_dep["spec"]["template"]["metadata"]["labels"],
                         ext_dep["spec"]["template"]["metadata"]["labels"])
        self.assertEqual(plugin_dep["spec"]["template"]["spec"]["serviceAccountName"],
                         ext_dep["spec"]["template"]["spec"]["serviceAccountName"])
        volume = plugin_dep["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"]
        self.assertEqual(volume, load("scheduler-plugin-config.yaml")[0]["metadata"]["name"])
        self.assertEqual(plugin_dep["spec"]["template"]["spec"]["containers"][0]["command"][0],
                         "toposched-kube-scheduler")

    def test_rbac_lets_toposched_create_bindings(self):
        rules = [d for d in load("rbac.yaml") if d["kind"] == "ClusterRole"][0]["rules"]
        self.assertTrue(any("pods/binding" in r["resources"] and "create" in r["verbs"] for r in rules))

    def test_rbac_lets_the_plugin_build_watch_compute_domains(self):
        docs = load("rbac.yaml")
        roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
        bound = [d["roleRef"]["name"] for d in docs if d["kind"] == "ClusterRoleBinding"
                 and any(s["name"] == "toposched-scheduler" for s in d["subjects"])]
        rules = [r for name in bound if name in roles for r in roles[name]["rules"]]
        self.assertTrue(any("resource.nvidia.com" in r["apiGroups"] and "computedomains" in r["resources"]
                            and {"list", "watch"} <= set(r["verbs"]) for r in rules), rules)


if __name__ == "__main__":
    unittest.main()
