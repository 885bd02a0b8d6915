package scheduler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// fakeComputeDomains: ComputeDomain name by "namespace/template".
type fakeComputeDomains map[string]string

func (f fakeComputeDomains) byTemplate(namespace, template string) (string, bool) {
	n, ok := f[namespace+"/"+template]
	return n, ok
}

// planRecorder is a serve whose member verb knows no pod (or, with planned, answers a
// group) and whose plan verb places the pod on the first offered node when fits(offer),
// recording every offer.
type planRecorder struct {
	mu      sync.Mutex
	planned bool
	fits    func(offer []string) bool
	offers  [][]string
}

func (f *planRecorder) server(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/toposched/member"):
			answerMember(w, f.planned, member{Job: "k8s:ml:imex", Size: 4, Node: "b1"})
		case strings.HasSuffix(r.URL.Path, "/toposched/plan"):
			var args extenderv1.ExtenderArgs
			if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.NodeNames == nil {
				t.Errorf("plan body: %v", err)
				return
			}
			offer := *args.NodeNames
			f.mu.Lock()
			f.offers = append(f.offers, offer)
			f.mu.Unlock()
			if f.fits(offer) {
				_ = json.NewEncoder(w).Encode(planned{Filter: extenderv1.ExtenderFilterResult{NodeNames: &[]string{offer[0]}}})
				return
			}
			failed := extenderv1.FailedNodesMap{}
			for _, n := range offer {
				failed[n] = "toposched: group k8s:ml:imex cannot be placed whole"
			}
			_ = json.NewEncoder(w).Encode(planned{Filter: extenderv1.ExtenderFilterResult{FailedNodes: failed}})
		default:
			t.Errorf("unexpected call %s %s", r.Method, r.URL)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
}

// cdPod: a pod of `gpus` nvidia.com/gpu whose claim "channel" is made from `template`, as a
// ComputeDomain's pods are.
func cdPod(name string, gpus int, template string) *v1.Pod {
	p := gpuPod(name, gpus)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "channel", ResourceClaimTemplateName: &template}}
	return p
}

// rack: `n` nodes "<prefix>1".."<prefix>n" in NVLink domain (clique) `clique`, 4 GPUs each.
func rack(prefix, clique string, n int) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for i := 1; i <= n; i++ {
		out = append(out, node(prefix+string(rune('0'+i)), func(nd *v1.Node) {
			nd.Labels[CliqueLabel] = clique
			nd.Status.Allocatable[GPUResource] = resource.MustParse("4")
		}))
	}
	return out
}

func withPod(info fwk.NodeInfo, pod *v1.Pod) fwk.NodeInfo {
	pod.Spec.NodeName = info.Node().Name
	info.(*framework.NodeInfo).AddPod(pod)
	return info
}

func cdPlugin(t *testing.T, url string) *Plugin {
	p := newPlugin(t, url)
	p.computeDomains = fakeComputeDomains{"ml/imex-channel": "imex"}
	return p
}

// A member of a ComputeDomain whose other pods already run in rack b is planned in rack b
// (the first and only plan call offers b's nodes), though rack a is listed first and has
// more room.
func TestPreFilterPlansAComputeDomainMemberInTheRackOfItsPods(t *testing.T) {
	f := &planRecorder{fits: func([]string) bool { return true }}
	serve := f.server(t)
	defer serve.Close()
	p := cdPlugin(t, serve.URL+"/toposched")
	nodes := append(rack("a", "rack-a", 3), rack("b", "rack-b", 3)...)
	withPod(nodes[3], cdPod("imex-0", 4, "imex-channel"))
	withPod(nodes[0], cdPod("other-0", 2, "other-channel")) // another job's pods count for nothing
	res, status := p.PreFilter(context.Background(), nil, cdPod("imex-1", 4, "imex-channel"), nodes)
	if !status.IsSuccess() {
		t.Fatalf("status %v", status)
	}
	if want := [][]string{{"b2", "b3"}}; !reflect.DeepEqual(f.offers, want) {
		t.Errorf("offers %v, want %v (rack b, where the ComputeDomain's pod is; b1 is full)", f.offers, want)
	}
	if !res.NodeNames.Has("b2") {
		t.Errorf("PreFilterResult %v, want b2", res.NodeNames)
	}
}

// Without pods placed yet, the first rack whose free GPUs hold every unassigned pod of the
// ComputeDomain is tried first, the tightest of those (rack b: 8 free for 2 pods of 4; rack c,
// 12 free, is kept for larger jobs; rack a, 4 free, cannot hold the job).
func TestPreFilterStartsAComputeDomainInTheTightestRackThatHoldsAllItsPods(t *testing.T) {
	f := &planRecorder{fits: func([]string) bool { return true }}
	serve := f.server(t)
	defer serve.Close()
	p := cdPlugin(t, serve.URL+"/toposched")
	nodes := append(append(rack("a", "rack-a", 1), rack("b", "rack-b", 2)...), rack("c", "rack-c", 3)...)
	pending := []*v1.Pod{cdPod("imex-0", 4, "imex-channel"), cdPod("imex-1", 4, "imex-channel"),
		cdPod("solo", 4, "")}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pod := range pending {
		_ = indexer.Add(pod)
	}
	p.pods = corelisters.NewPodLister(indexer)
	if _, status := p.PreFilter(context.Background(), nil, pending[0], nodes); !status.IsSuccess() {
		t.Fatalf("status %v", status)
	}
	if want := [][]string{{"b1", "b2"}}; !reflect.DeepEqual(f.offers, want) {
		t.Errorf("offers %v, want %v", f.offers, want)
	}
}

// A ComputeDomain that fits in no single rack: each rack is tried (the one holding its pods
// first, then by room), then the whole offer, where serve spreads it over the fewest.
func TestPreFilterPlansAComputeDomainThatFitsNoRackOverTheWholeOffer(t *testing.T) {
	f := &planRecorder{fits: func(offer []string) bool { return len(offer) > 3 }}
	serve := f.server(t)
	defer serve.Close()
	p := cdPlugin(t, serve.URL+"/toposched")
	nodes := append(append(rack("a", "rack-a", 2), rack("b", "rack-b", 3)...),
		node("plain", nil)) // in no NVLink domain: only in the whole offer
	withPod(nodes[0], cdPod("imex-0", 2, "imex-channel"))
	res, status := p.PreFilter(context.Background(), nil, cdPod("imex-1", 2, "imex-channel"), nodes)
	if !status.IsSuccess() {
		t.Fatalf("status %v", status)
	}
	want := [][]string{{"a1", "a2"}, {"b1", "b2", "b3"}, {"a1", "a2", "b1", "b2", "b3", "plain"}}
	if !reflect.DeepEqual(f.offers, want) {
		t.Errorf("offers %v, want %v", f.offers, want)
	}
	if !res.NodeNames.Has("a1") {
		t.Errorf("PreFilterResult %v, want a1", res.NodeNames)
	}
}

// A later member of a gang serve has planned already is offered every node (serve answers
// its plan), and a pod of no ComputeDomain is offered every node too.
func TestPreFilterLeavesPlannedGangsAndOtherPodsToTheWholeOffer(t *testing.T) {
	f := &planRecorder{planned: true, fits: func([]string) bool { return true }}
	serve := f.server(t)
	defer serve.Close()
	p := cdPlugin(t, serve.URL+"/toposched")
	nodes := append(rack("a", "rack-a", 2), rack("b", "rack-b", 2)...)
	for _, pod := range []*v1.Pod{cdPod("imex-1", 4, "imex-channel"), cdPod("web-0", 4, "other-channel")} {
		f.offers = nil
		if _, status := p.PreFilter(context.Background(), nil, pod, nodes); !status.IsSuccess() {
			t.Fatalf("%s: status %v", pod.Name, status)
		}
		if want := [][]string{{"a1", "a2", "b1", "b2"}}; !reflect.DeepEqual(f.offers, want) {
			t.Errorf("%s: offers %v, want %v", pod.Name, f.offers, want)
		}
	}
}

// A gang PodGroup of a ComputeDomain, without a topology key: one candidate per NVLink
// domain, the lowest predicted time answered; none fitting, the parent placement.
func TestGeneratePlacementsGivesAComputeDomainGangOneCandidatePerNVLinkDomain(t *testing.T) {
	f := &fakeDryRuns{times: map[string]float64{"a1": 900, "b1": 400}}
	serve := f.server(t)
	defer serve.Close()
	p := cdPlugin(t, serve.URL+"/toposched")
	nodes := append(rack("a", "rack-a", 2), rack("b", "rack-b", 2)...)
	parent := &fwk.Placement{Nodes: nodes}
	pod := cdPod("imex-0", 4, "imex-channel")
	res, status := p.GeneratePlacements(context.Background(), nil, gangInfo("", 4, pod), parent)
	if !status.IsSuccess() {
		t.Fatalf("status %v", status)
	}
	if len(res.Placements) != 1 || !reflect.DeepEqual(nodeNames(res.Placements[0]), []string{"b1", "b2"}) {
		t.Fatalf("placements %+v, want rack b's nodes", res.Placements)
	}
	if len(f.bodies) != 2 {
		t.Errorf("%d dry runs, want one per rack", len(f.bodies))
	}
	f.times = map[string]float64{} // fits nowhere
	res, status = p.GeneratePlacements(context.Background(), nil, gangInfo("", 4, pod), parent)
	if !status.IsSuccess() || len(res.Placements) != 1 || res.Placements[0] != parent {
		t.Fatalf("status %v, placements %+v: want the parent placement", status, res)
	}
}

// The informer's index: ComputeDomains by namespace and channel template (both API versions
// carry spec.channel.resourceClaimTemplate.name); two naming one template: the first by name.
func TestComputeDomainsAreFoundByTheirChannelTemplate(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{templateIndex: channelTemplateKey})
	cd := func(ns, name, template string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec":     map[string]any{"channel": map[string]any{"resourceClaimTemplate": map[string]any{"name": template}}}}}
		return u
	}
	for _, u := range []*unstructured.Unstructured{cd("ml", "imex-b", "chan"), cd("ml", "imex-a", "chan"),
		cd("other", "imex-c", "chan"), {Object: map[string]any{"apiVersion": "resource.nvidia.com/v1beta1",
			"kind": "ComputeDomain", "metadata": map[string]any{"namespace": "ml", "name": "no-channel"}}}} {
		if err := indexer.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	s := informerComputeDomains{indexer: indexer}
	got := []string{}
	for _, q := range [][2]string{{"ml", "chan"}, {"other", "chan"}, {"ml", "nope"}} {
		name, ok := s.byTemplate(q[0], q[1])
		got = append(got, name+":"+map[bool]string{true: "y", false: "n"}[ok])
	}
	if want := []string{"imex-a:y", "imex-c:y", ":n"}; !reflect.DeepEqual(got, want) {
		t.Errorf("lookups %v, want %v", got, want)
	}
}

// A gang PodGroup without a key (and no ComputeDomain) on a cluster of NVLink domains: the
// whole offer and each domain are candidates; a domain predicting less than the whole offer
// is answered (a plan over the whole offer could split a group one rack holds).
func TestGeneratePlacementsWithoutAKeyAlsoTriesEachNVLinkDomain(t *testing.T) {
	f := &fakeDryRuns{times: map[string]float64{"0plain": 900, "b1": 400}} // rack a: does not fit
	serve := f.server(t)
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	nodes := append(append(rack("a", "rack-a", 2), rack("b", "rack-b", 2)...), node("0plain", nil))
	res, status := p.GeneratePlacements(context.Background(), nil, gangInfo("", 4, gpuPod("train-0", 4)),
		&fwk.Placement{Nodes: nodes})
	if !status.IsSuccess() {
		t.Fatalf("status %v", status)
	}
	if len(res.Placements) != 1 || !reflect.DeepEqual(nodeNames(res.Placements[0]), []string{"b1", "b2"}) {
		t.Fatalf("placements %+v, want rack b's nodes", res.Placements)
	}
	if len(f.bodies) != 3 {
		t.Errorf("%d dry runs, want 3 (the whole offer, rack a, rack b)", len(f.bodies))
	}
}
