package scheduler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

type fakePodGroups map[string]*schedulingv1beta1.PodGroup

func (f fakePodGroups) podGroup(ns, name string) (*schedulingv1beta1.PodGroup, error) {
	if pg, ok := f[ns+"/"+name]; ok {
		return pg, nil
	}
	return nil, apierrors.NewNotFound(schedulingv1beta1.Resource("podgroups"), name)
}

func inGroup(pod *v1.Pod, group string) *v1.Pod {
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: str(group)}
	return pod
}

// serveRecording: a fake serve that plans every pod on n1 and records the annotations of
// the pod it was asked about.
func serveRecording(t *testing.T, seen *map[string]string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.Pod == nil {
			t.Errorf("plan body: %v", err)
			return
		}
		*seen = args.Pod.Annotations
		_ = json.NewEncoder(w).Encode(planned{Filter: extenderv1.ExtenderFilterResult{NodeNames: &[]string{"n1"}}})
	}))
}

// A pod of a gang PodGroup is planned as a member of a group of minCount: serve gets the
// group's name and size; the pod itself is not changed. A basic-policy PodGroup and a pod in
// none are planned alone; a PodGroup not there yet is waited for.
func TestPreFilterPlansAKubernetesPodGroupWhole(t *testing.T) {
	gang := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}},
			SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{
				Topology: []schedulingv1beta1.TopologyConstraint{{Key: "fabric.topograph.run/tier-0"}}}}}
	basic := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "loose", Namespace: "ml"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}}}
	cases := []struct {
		name      string
		pod       *v1.Pod
		group     string // want serve to see this toposched.io/pod-group ("" = none)
		size      string
		refusedIn string // a refusal containing this, serve not asked
	}{
		{"gang", inGroup(gpuPod("w-0", 8), "train"), "train", "3", ""},
		{"basic", inGroup(gpuPod("b-0", 8), "loose"), "", "", ""},
		{"none", gpuPod("s-0", 8), "", "", ""},
		{"missing", inGroup(gpuPod("m-0", 8), "later"), "", "", "waiting for PodGroup ml/later"},
	}
	for _, c := range cases {
		var seen map[string]string
		serve := serveRecording(t, &seen)
		p := newPlugin(t, serve.URL+"/toposched")
		p.podGroups = fakePodGroups{"ml/train": gang, "ml/loose": basic}
		before := c.pod.DeepCopy()
		_, status := p.PreFilter(context.Background(), nil, c.pod, []fwk.NodeInfo{node("n1", nil)})
		serve.Close()
		if c.refusedIn != "" {
			if status.IsSuccess() || !strings.Contains(status.Message(), c.refusedIn) || seen != nil {
				t.Errorf("%s: status %v, serve saw %v: want a refusal containing %q and no call", c.name, status, seen, c.refusedIn)
			}
			continue
		}
		if !status.IsSuccess() {
			t.Fatalf("%s: %v", c.name, status)
		}
		wantLevel := ""
		if c.group != "" {
			wantLevel = "fabric.topograph.run/tier-0" // the PodGroup's topology constraint
		}
		if seen[RequiredTopologyAnnotation] != wantLevel {
			t.Errorf("%s: serve saw required topology %q, want %q", c.name, seen[RequiredTopologyAnnotation], wantLevel)
		}
		if seen[PodGroupAnnotation] != c.group || seen[GroupSizeAnnotation] != c.size {
			t.Errorf("%s: serve saw group %q size %q, want %q %q", c.name, seen[PodGroupAnnotation],
				seen[GroupSizeAnnotation], c.group, c.size)
		}
		if c.pod.Annotations[PodGroupAnnotation] != "" || len(c.pod.Annotations) != len(before.Annotations) {
			t.Errorf("%s: the scheduler's pod was changed: %v", c.name, c.pod.Annotations)
		}
	}
	// Without a PodGroup source (no PodGroupManager): refused, not planned alone.
	p := newPlugin(t, "http://127.0.0.1:1/toposched")
	p.podGroups = nil
	if _, status := p.PreFilter(context.Background(), nil, inGroup(gpuPod("w-1", 8), "train"),
		[]fwk.NodeInfo{node("n1", nil)}); status.IsSuccess() || status.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("no PodGroup source: %v, want UnschedulableAndUnresolvable", status)
	}
}

// kube-scheduler v1.37's pod group algorithm undoes every member's Reserve (Unreserve) before
// it reserves them again for binding: inside that cycle serve's reservation is kept; outside
// it (a Permit time-out, a failed bind) serve is asked to release.
func TestUnreserveKeepsServesPlanInsideAPodGroupCycle(t *testing.T) {
	calls := 0
	serve := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/unreserve") {
			calls++
		}
		_, _ = w.Write([]byte(`{"released":""}`))
	}))
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	pod := inGroup(gpuPod("w-0", 8), "train")
	inCycle := framework.NewCycleState()
	inCycle.SetPodGroupSchedulingCycle(framework.NewCycleState())
	p.Unreserve(context.Background(), inCycle, pod, "n1")
	if calls != 0 {
		t.Errorf("Unreserve inside the pod group cycle called serve's unreserve %d times, want 0", calls)
	}
	p.Unreserve(context.Background(), framework.NewCycleState(), pod, "n1")
	if calls != 1 {
		t.Errorf("Unreserve outside the pod group cycle called serve's unreserve %d times, want 1", calls)
	}
}

// fakePodGroupInfo is fwk.PodGroupInfo for one PodGroup's unscheduled pods.
type fakePodGroupInfo struct{ pods []*v1.Pod }

func (f fakePodGroupInfo) GetUnscheduledPods() []*v1.Pod                               { return f.pods }
func (f fakePodGroupInfo) GetName() string                                             { return "train" }
func (f fakePodGroupInfo) GetNamespace() string                                        { return "ml" }
func (f fakePodGroupInfo) GetType() fwk.EntityKeyType                                  { return "" }
func (f fakePodGroupInfo) GetKey() string                                              { return "ml/train" }
func (f fakePodGroupInfo) GetPodGroup() *schedulingv1beta1.PodGroup                    { return nil }
func (f fakePodGroupInfo) GetCompositePodGroup() *schedulingv1alpha3.CompositePodGroup { return nil }
func (f fakePodGroupInfo) GetChildren() []fwk.PodGroupInfo                             { return nil }

// A pod group whose cycle failed: serve is asked to release each GPU member's slot (the
// group's plan goes once no member is bound); pods without GPUs are left out; the group is
// never made schedulable.
func TestPodGroupPostFilterReleasesServesPlan(t *testing.T) {
	var asked []string
	serve := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderBindingArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || !strings.HasSuffix(r.URL.Path, "/unreserve") {
			t.Errorf("%s: %v", r.URL.Path, err)
		}
		asked = append(asked, args.PodName)
		_, _ = w.Write([]byte(`{"released":"k8s:ml:train"}`))
	}))
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	pods := []*v1.Pod{inGroup(gpuPod("w-0", 8), "train"), inGroup(gpuPod("cpu-0", 0), "train"), inGroup(gpuPod("w-1", 8), "train")}
	res, status := p.PodGroupPostFilter(context.Background(), nil, fakePodGroupInfo{pods}, nil)
	if res != nil || status.Code() != fwk.Unschedulable {
		t.Errorf("result %v, status %v: want nil and Unschedulable", res, status)
	}
	if strings.Join(asked, ",") != "w-0,w-1" {
		t.Errorf("serve's unreserve asked for %v, want the GPU members w-0,w-1", asked)
	}
}
