package scheduler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

const cliqueKey = "nvidia.com/gpu.clique"

// fakeDryRuns: a serve whose member verb knows no pod (or `planned`), and whose dry-run
// verb answers the predicted time of the first of NodeNames (absent: 422), recording every
// request.
type fakeDryRuns struct {
	mu      sync.Mutex
	times   map[string]float64
	planned bool
	bodies  []extenderv1.ExtenderArgs // every dry run
	offers  [][]string                // the NodeNames of every plan call
}

func (f *fakeDryRuns) server(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/toposched/member"):
			answerMember(w, f.planned, member{Job: "k8s:ml:train", Size: 2, Node: "a1"})
		case strings.HasSuffix(r.URL.Path, "/toposched/plan"):
			var args extenderv1.ExtenderArgs
			if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.NodeNames == nil {
				t.Errorf("plan body: %v", err)
				return
			}
			f.mu.Lock()
			f.offers = append(f.offers, *args.NodeNames)
			f.mu.Unlock()
			_ = json.NewEncoder(w).Encode(planned{Filter: extenderv1.ExtenderFilterResult{NodeNames: &[]string{(*args.NodeNames)[0]}}})
		case strings.HasSuffix(r.URL.Path, "/toposched/dry-run"):
			var args extenderv1.ExtenderArgs
			if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.NodeNames == nil || args.Pod == nil {
				t.Errorf("dry-run body: %v", err)
				return
			}
			f.mu.Lock()
			f.bodies = append(f.bodies, args)
			f.mu.Unlock()
			us, ok := f.times[(*args.NodeNames)[0]]
			if !ok {
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = w.Write([]byte(`{"error":{"code":"unplaceable","message":"needs 16 GPUs, 8 free"}}`))
				return
			}
			_, _ = w.Write([]byte(`{"job":"job-1","predicted_comm_us":` + jsonFloat(us) + `}`))
		default:
			t.Errorf("unexpected call %s %s", r.Method, r.URL)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
}

func jsonFloat(f float64) string { b, _ := json.Marshal(f); return string(b) }

func labelled(name string, labels map[string]string) fwk.NodeInfo {
	return node(name, func(n *v1.Node) {
		for k, v := range labels {
			n.Labels[k] = v
		}
	})
}

func gangInfo(key string, minCount int32, pods ...*v1.Pod) *framework.PodGroupInfo {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}}}
	if key != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}}}
	}
	return &framework.PodGroupInfo{Namespace: "ml", Name: "train", Type: fwk.PodGroupKeyType, PodGroup: pg,
		UnscheduledPods: pods}
}

func nodeNames(p *fwk.Placement) []string {
	var out []string
	for _, n := range p.Nodes {
		out = append(out, n.Node().Name)
	}
	sort.Strings(out)
	return out
}

// Three NVLink domains (the clique label), one node without it and one cordoned: serve is
// asked once per domain for the whole group within that domain's usable nodes, sent the pod
// as PreFilter sends it (every annotation, not a subset copied here: the Kueue slice
// annotations too; the group's name and minCount; no required level, as each candidate is
// one domain); the domain where the plan's predicted time is lowest is the one placement
// answered; a domain where the group does not fit is left out.
func TestGeneratePlacementsAnswersTheDomainWithTheLowestPredictedTime(t *testing.T) {
	f := &fakeDryRuns{times: map[string]float64{"a1": 900, "b1": 400}} // c1: does not fit
	serve := f.server(t)
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	nodes := []fwk.NodeInfo{
		labelled("a1", map[string]string{cliqueKey: "rack-a"}), labelled("a2", map[string]string{cliqueKey: "rack-a"}),
		labelled("b2", map[string]string{cliqueKey: "rack-b"}), labelled("b1", map[string]string{cliqueKey: "rack-b"}),
		node("b3", func(n *v1.Node) { n.Labels[cliqueKey] = "rack-b"; n.Spec.Unschedulable = true }),
		labelled("c1", map[string]string{cliqueKey: "rack-c"}),
		node("x1", nil), // no clique label: in no candidate
	}
	pod := inGroup(gpuPod("w-0", 8), "train")
	pod.Annotations = map[string]string{"toposched.io/tp": "8", "toposched.io/pp": "2", "toposched.io/policy": "topo",
		"kueue.x-k8s.io/podset-slice-size": "1", "kueue.x-k8s.io/podset-slice-required-topology": "kubernetes.io/hostname"}
	res, status := p.GeneratePlacements(context.Background(), nil, gangInfo(cliqueKey, 2, pod, inGroup(gpuPod("w-1", 8), "train")),
		&fwk.Placement{Nodes: nodes})
	if !status.IsSuccess() {
		t.Fatal(status)
	}
	if len(res.Placements) != 1 || res.Placements[0].Name != "toposched:rack-b" ||
		strings.Join(nodeNames(res.Placements[0]), ",") != "b1,b2" {
		t.Fatalf("placements %+v, want one, toposched:rack-b on b1,b2", res.Placements)
	}
	if len(f.bodies) != 3 {
		t.Fatalf("%d dry runs, want one per domain (3)", len(f.bodies))
	}
	want := map[string]string{"toposched.io/tp": "8", "toposched.io/pp": "2", "toposched.io/policy": "topo",
		"kueue.x-k8s.io/podset-slice-size": "1", "kueue.x-k8s.io/podset-slice-required-topology": "kubernetes.io/hostname",
		PodGroupAnnotation: "train", GroupSizeAnnotation: "2"}
	sent := f.bodies[0].Pod
	for k, v := range want {
		if sent.Annotations[k] != v {
			t.Errorf("dry run pod annotation %s = %q, want %q (annotations %v)", k, sent.Annotations[k], v, sent.Annotations)
		}
	}
	if _, set := sent.Annotations[RequiredTopologyAnnotation]; set || len(sent.Annotations) != len(want) {
		t.Errorf("dry run pod annotations %v, want exactly %v", sent.Annotations, want)
	}
	if sentGPUs := sent.Spec.Containers[0].Resources.Limits[GPUResource]; sent.Name != "w-0" || sentGPUs.Value() != 8 {
		t.Errorf("dry run pod %s %v, want w-0 with its 8 GPUs", sent.Name, sent.Spec.Containers[0].Resources)
	}
	if _, set := pod.Annotations[PodGroupAnnotation]; set {
		t.Errorf("the scheduler's pod was changed: %v", pod.Annotations)
	}
	offered := []string{strings.Join(*f.bodies[0].NodeNames, ","), strings.Join(*f.bodies[1].NodeNames, ","),
		strings.Join(*f.bodies[2].NodeNames, ",")}
	if strings.Join(offered, " ") != "a1,a2 b1,b2 c1" {
		t.Errorf("domains offered %v: want a1,a2, b1,b2 (b3 cordoned) and c1", offered)
	}
}

// Equal predictions and equal free GPUs: the first domain in name order. No topology key
// and no NVLink domain label: one candidate, every usable node. Nothing fits anywhere:
// Unschedulable with serve's reason.
func TestGeneratePlacementsTiesNoKeyAndNoFit(t *testing.T) {
	f := &fakeDryRuns{times: map[string]float64{"a1": 500, "b1": 500}}
	serve := f.server(t)
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	nodes := []fwk.NodeInfo{labelled("b1", map[string]string{cliqueKey: "rack-b"}),
		labelled("a1", map[string]string{cliqueKey: "rack-a"})}
	pod := inGroup(gpuPod("w-0", 8), "train")
	res, status := p.GeneratePlacements(context.Background(), nil, gangInfo(cliqueKey, 1, pod), &fwk.Placement{Nodes: nodes})
	if !status.IsSuccess() || len(res.Placements) != 1 || res.Placements[0].Name != "toposched:rack-a" {
		t.Errorf("tie: %+v %v, want rack-a", res, status)
	}
	plain := []fwk.NodeInfo{node("b1", nil), node("a1", nil)}
	res, status = p.GeneratePlacements(context.Background(), nil, gangInfo("", 1, pod), &fwk.Placement{Nodes: plain})
	if !status.IsSuccess() || len(res.Placements) != 1 || strings.Join(nodeNames(res.Placements[0]), ",") != "a1,b1" {
		t.Errorf("no key: %+v %v, want one placement of every node", res, status)
	}
	f.times = map[string]float64{}
	_, status = p.GeneratePlacements(context.Background(), nil, gangInfo(cliqueKey, 1, pod), &fwk.Placement{Nodes: nodes})
	if status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), "needs 16 GPUs, 8 free") {
		t.Errorf("no fit: %v, want Unschedulable with serve's reason", status)
	}
}

// Equal predictions in two racks (every GPU pair of an NVL72 rack is NVLink, so a gang that
// fits in either predicts the same): the tighter fit, the rack with fewer free GPUs, wins
// whatever the name order, and keeps the emptier rack whole for a later, larger gang (on
// GB200 a 16-GPU gang put in the first rack by name left no rack for a 32-GPU gang:
// placement-compare, 2026-12-07). Without a key, the whole offer ties with the racks and the
// tighter rack wins too; predictions a part in 10^7 apart are equal; a lower prediction
// still beats a tighter fit.
func TestGeneratePlacementsTiesGoToTheTightestFit(t *testing.T) {
	f := &fakeDryRuns{times: map[string]float64{"a1": 500, "b1": 500 * (1 + 1e-7)}}
	serve := f.server(t)
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	nodes := []fwk.NodeInfo{
		labelled("a1", map[string]string{cliqueKey: "rack-a"}), labelled("a2", map[string]string{cliqueKey: "rack-a"}),
		withPod(labelled("b1", map[string]string{cliqueKey: "rack-b"}), gpuPod("other", 6)),
		labelled("b2", map[string]string{cliqueKey: "rack-b"}),
	}
	gang := func(key string) *framework.PodGroupInfo {
		return gangInfo(key, 2, inGroup(gpuPod("w-0", 2), "train"), inGroup(gpuPod("w-1", 2), "train"))
	}
	res, status := p.GeneratePlacements(context.Background(), nil, gang(cliqueKey), &fwk.Placement{Nodes: nodes})
	if !status.IsSuccess() || len(res.Placements) != 1 || res.Placements[0].Name != "toposched:rack-b" {
		t.Errorf("keyed tie: %+v %v, want toposched:rack-b (10 GPUs free, rack-a 16)", res, status)
	}
	res, status = p.GeneratePlacements(context.Background(), nil, gang(""), &fwk.Placement{Nodes: nodes})
	if !status.IsSuccess() || len(res.Placements) != 1 || res.Placements[0].Name != "toposched:"+cliqueKey+"=rack-b" ||
		strings.Join(nodeNames(res.Placements[0]), ",") != "b1,b2" {
		t.Errorf("no key, tie with the whole offer: %+v %v, want rack-b's nodes b1,b2", res, status)
	}
	f.times["b1"] = 501
	res, status = p.GeneratePlacements(context.Background(), nil, gang(cliqueKey), &fwk.Placement{Nodes: nodes})
	if !status.IsSuccess() || len(res.Placements) != 1 || res.Placements[0].Name != "toposched:rack-a" {
		t.Errorf("lower prediction: %+v %v, want toposched:rack-a (500 us against 501)", res, status)
	}
}

// The parent placement, unchanged and without a dry run: a basic PodGroup, pods without
// GPUs, and a gang serve already holds a plan for.
func TestGeneratePlacementsLeavesOtherGroupsToTheParent(t *testing.T) {
	f := &fakeDryRuns{times: map[string]float64{"a1": 1}}
	serve := f.server(t)
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	parent := &fwk.Placement{Nodes: []fwk.NodeInfo{labelled("a1", map[string]string{cliqueKey: "rack-a"})}}
	basic := gangInfo(cliqueKey, 1, inGroup(gpuPod("w-0", 8), "train"))
	basic.PodGroup.Spec.SchedulingPolicy = schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
	cases := map[string]*framework.PodGroupInfo{
		"basic":   basic,
		"no GPUs": gangInfo(cliqueKey, 1, inGroup(gpuPod("c-0", 0), "train")),
	}
	for name, pg := range cases {
		res, status := p.GeneratePlacements(context.Background(), nil, pg, parent)
		if !status.IsSuccess() || len(res.Placements) != 1 || res.Placements[0] != parent {
			t.Errorf("%s: %+v %v, want the parent placement", name, res, status)
		}
	}
	f.planned = true
	res, status := p.GeneratePlacements(context.Background(), nil, gangInfo(cliqueKey, 1, inGroup(gpuPod("w-0", 8), "train")), parent)
	if !status.IsSuccess() || res.Placements[0] != parent {
		t.Errorf("planned: %+v %v, want the parent placement", res, status)
	}
	if len(f.bodies) != 0 {
		t.Errorf("%d dry runs, want none", len(f.bodies))
	}
}

// Inside a placement of one domain the PodGroup's key is not passed to serve as a level
// (serve has no tier for an NVLink domain label); over several domains it is.
func TestPreFilterPassesTheTopologyKeyOnlyWhenTheOfferSpansDomains(t *testing.T) {
	gang := gangInfo(cliqueKey, 2).PodGroup
	for _, c := range []struct {
		name  string
		nodes []fwk.NodeInfo
		want  string
	}{
		{"one domain", []fwk.NodeInfo{labelled("a1", map[string]string{cliqueKey: "r1"}), labelled("a2", map[string]string{cliqueKey: "r1"})}, ""},
		{"two domains", []fwk.NodeInfo{labelled("a1", map[string]string{cliqueKey: "r1"}), labelled("b1", map[string]string{cliqueKey: "r2"})}, cliqueKey},
		{"a node without the key", []fwk.NodeInfo{labelled("a1", map[string]string{cliqueKey: "r1"}), node("x1", nil)}, cliqueKey},
	} {
		var seen map[string]string
		serve := serveRecording(t, &seen)
		p := newPlugin(t, serve.URL+"/toposched")
		p.podGroups = fakePodGroups{"ml/train": gang}
		if _, status := p.PreFilter(context.Background(), nil, inGroup(gpuPod("w-0", 8), "train"), c.nodes); !status.IsSuccess() {
			t.Fatalf("%s: %v", c.name, status)
		}
		serve.Close()
		if seen[RequiredTopologyAnnotation] != c.want {
			t.Errorf("%s: serve saw required topology %q, want %q", c.name, seen[RequiredTopologyAnnotation], c.want)
		}
	}
}

// kube-scheduler gives PreFilter every node, also inside a placement: a member's PreFilter
// offers serve only the nodes of the placement GeneratePlacements chose for its pod group
// cycle (through the cycle states kube-scheduler links: pod -> placement -> pod group), and
// every node outside such a cycle.
func TestPreFilterOffersOnlyThePlacementToposchedGenerated(t *testing.T) {
	f := &fakeDryRuns{times: map[string]float64{"a1": 900, "b1": 400}}
	serve := f.server(t)
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	info := gangInfo(cliqueKey, 2, inGroup(gpuPod("w-0", 8), "train"), inGroup(gpuPod("w-1", 8), "train"))
	p.podGroups = fakePodGroups{"ml/train": info.PodGroup}
	nodes := []fwk.NodeInfo{
		labelled("a1", map[string]string{cliqueKey: "rack-a"}), labelled("a2", map[string]string{cliqueKey: "rack-a"}),
		labelled("b1", map[string]string{cliqueKey: "rack-b"}), labelled("b2", map[string]string{cliqueKey: "rack-b"}),
	}
	groupState := framework.NewCycleState()
	if _, status := p.GeneratePlacements(context.Background(), groupState, info, &fwk.Placement{Nodes: nodes}); !status.IsSuccess() {
		t.Fatal(status)
	}
	placementState := framework.NewCycleState()
	placementState.SetPodGroupSchedulingCycle(groupState)
	podState := framework.NewCycleState()
	podState.SetPlacementCycleState(placementState)
	if _, status := p.PreFilter(context.Background(), podState, info.UnscheduledPods[0], nodes); !status.IsSuccess() {
		t.Fatal(status)
	}
	if _, status := p.PreFilter(context.Background(), framework.NewCycleState(), info.UnscheduledPods[1], nodes); !status.IsSuccess() {
		t.Fatal(status)
	}
	if len(f.offers) != 2 || strings.Join(f.offers[0], ",") != "b1,b2" || strings.Join(f.offers[1], ",") != "a1,a2,b1,b2" {
		t.Errorf("offers %v: want the chosen placement b1,b2 inside the cycle, every node outside it", f.offers)
	}
}

// answerMember answers the member verb as serve does: the group's slot when one is planned,
// else 404 not_found.
func answerMember(w http.ResponseWriter, planned bool, m member) {
	if !planned {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no slot"}}`))
		return
	}
	_ = json.NewEncoder(w).Encode(m)
}
