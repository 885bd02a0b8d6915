package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serveNodes is serve's GET /v1/nodes and PUT /v1/nodes/NAME/availability (f.mu held).
func (f *fakeServe) serveNodes(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/nodes" {
		var parts []string
		for name := range f.nodes {
			parts = append(parts, fmt.Sprintf(`{"node":%q,"available":true}`, name))
		}
		fmt.Fprintf(w, `{"nodes":[%s]}`, strings.Join(parts, ","))
		return
	}
	name, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/nodes/"), "/availability")
	var change struct {
		Available *bool  `json:"available"`
		Reason    string `json:"reason"`
		Source    string `json:"source"`
	}
	switch {
	case r.Method != http.MethodPut || !ok:
		w.WriteHeader(http.StatusNotFound)
	case r.Header.Get("Authorization") != "Bearer "+f.token:
		w.WriteHeader(http.StatusUnauthorized)
	case json.NewDecoder(r.Body).Decode(&change) != nil || change.Available == nil || change.Source != "k8s" ||
		*change.Available == (change.Reason != ""):
		w.WriteHeader(http.StatusBadRequest)
	case f.failFirstPut > 0:
		f.failFirstPut--
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		f.puts = append(f.puts, name+"="+change.Reason)
		if _, known := f.nodes[name]; !known {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		f.nodes[name] = change.Reason
		fmt.Fprintf(w, `{"node":%q}`, name)
	}
}

// nodeReasons is serve's view: "node=reason" for each node, sorted.
func (f *fakeServe) nodeReasons() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name, reason := range f.nodes {
		out = append(out, name+"="+reason)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func (f *fakeServe) putCount(node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.puts {
		if strings.HasPrefix(p, node+"=") {
			n++
		}
	}
	return n
}

func (f *fixture) expectNodes(want string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && f.serve.nodeReasons() != want {
		time.Sleep(10 * time.Millisecond)
	}
	if got := f.serve.nodeReasons(); got != want {
		f.t.Fatalf("serve's nodes:\n got %s\nwant %s", got, want)
	}
}

func readyNode(name string, change func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if change != nil {
		change(n)
	}
	return n
}

func (f *fixture) createNode(n *corev1.Node) {
	f.t.Helper()
	if _, err := f.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) updateNode(name string, change func(*corev1.Node)) {
	f.t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	change(n)
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

func TestUnavailableReason(t *testing.T) {
	tolerated := []string{"nvidia.com/gpu"}
	taint := func(key string, effect corev1.TaintEffect) func(*corev1.Node) {
		return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
	}
	cases := []struct {
		name   string
		node   *corev1.Node
		reason string
	}{
		{"ready", readyNode("n", nil), ""},
		{"cordoned", readyNode("n", func(n *corev1.Node) {
			n.Spec.Unschedulable = true
			taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)(n)
		}), "cordoned"},
		{"not ready, with the lifecycle's taint", readyNode("n", func(n *corev1.Node) {
			notReady(n)
			taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)(n)
		}), "NotReady"},
		{"no Ready condition", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, "NotReady"},
		{"GPU taint tolerated", readyNode("n", taint("nvidia.com/gpu", corev1.TaintEffectNoSchedule)), ""},
		{"PreferNoSchedule ignored", readyNode("n", taint("dedicated", corev1.TaintEffectPreferNoSchedule)), ""},
		{"NoExecute taint", readyNode("n", taint("maintenance", corev1.TaintEffectNoExecute)), "tainted maintenance:NoExecute"},
		{"everything", readyNode("n", func(n *corev1.Node) {
			n.Spec.Unschedulable = true
			notReady(n)
			taint("a", corev1.TaintEffectNoSchedule)(n)
		}), "cordoned, NotReady, tainted a:NoSchedule"},
		{"too long for serve", readyNode("n", func(n *corev1.Node) {
			for i := 0; i < 20; i++ {
				taint(fmt.Sprintf("example.com/taint-number-%02d", i), corev1.TaintEffectNoSchedule)(n)
			}
		}), ""},
	}
	for _, c := range cases {
		got := UnavailableReason(c.node, tolerated)
		if c.name == "too long for serve" {
			if len(got) != maxReasonBytes || !strings.HasSuffix(got, "...") {
				t.Errorf("%s: %d bytes %q, want %d ending in ...", c.name, len(got), got, maxReasonBytes)
			}
			continue
		}
		if got != c.reason {
			t.Errorf("%s: %q, want %q", c.name, got, c.reason)
		}
	}
}

func TestNodesFollowCordonReadinessTaintsAndDeletion(t *testing.T) {
	f := startServe(t, &fakeServe{nodes: map[string]string{"a": "", "b": "", "c": "", "gone": "stale"}}, 0)
	f.createNode(readyNode("a", nil))
	f.createNode(readyNode("b", func(n *corev1.Node) { n.Spec.Unschedulable = true }))
	f.createNode(readyNode("c", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	}))
	f.createNode(readyNode("not-in-serve", nil))
	// "gone" has no Node object: the start-up reconcile of serve's nodes marks it.
	f.expectNodes("a= b=cordoned c= gone=" + deletedReason)

	f.updateNode("b", func(n *corev1.Node) { n.Spec.Unschedulable = false })
	f.updateNode("a", notReady)
	f.expectNodes("a=NotReady b= c= gone=" + deletedReason)
	if err := f.client.CoreV1().Nodes().Delete(context.Background(), "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expectNodes("a=NotReady b= c=" + deletedReason + " gone=" + deletedReason)

	// An update that changes nothing for availability (a label) sends nothing; a node serve
	// does not know is asked about once, not retried.
	before := f.serve.putCount("a")
	f.updateNode("a", func(n *corev1.Node) { n.Labels = map[string]string{"x": "y"} })
	time.Sleep(300 * time.Millisecond)
	if got := f.serve.putCount("a"); got != before {
		t.Errorf("a label change sent %d PUTs", got-before)
	}
	if got := f.serve.putCount("not-in-serve"); got != 1 {
		t.Errorf("a node serve does not know got %d PUTs, want 1", got)
	}
}

func TestNodeAvailabilityIsRetriedWhenServeFails(t *testing.T) {
	f := startServe(t, &fakeServe{nodes: map[string]string{"a": ""}, failFirstPut: 3}, 0)
	f.createNode(readyNode("a", func(n *corev1.Node) { n.Spec.Unschedulable = true }))
	f.expectNodes("a=cordoned")
}
