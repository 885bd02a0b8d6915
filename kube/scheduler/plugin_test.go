package scheduler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

func gpuPod(name string, gpus int) *v1.Pod {
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	if gpus > 0 {
		res[GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main",
			Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}},
	}
}

func node(name string, edit func(*v1.Node)) fwk.NodeInfo {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("64Gi"),
			v1.ResourcePods: resource.MustParse("110"), GPUResource: resource.MustParse("8")}}}
	if edit != nil {
		edit(n)
	}
	info := framework.NewNodeInfo()
	info.SetNode(n)
	return info
}

func newPlugin(t *testing.T, url string) *Plugin {
	t.Helper()
	raw, _ := json.Marshal(Args{URL: url, TimeoutSeconds: 2})
	p, err := New(context.Background(), &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*Plugin)
}

func TestNewRejectsAMissingOrMalformedURL(t *testing.T) {
	for _, args := range []Args{{}, {URL: "toposched:7071/toposched"}, {URL: "http://x", PermitWaitSeconds: -1}} {
		raw, _ := json.Marshal(args)
		_, err := New(context.Background(), &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}, nil)
		if err == nil || !strings.Contains(err.Error(), "Toposched args") {
			t.Errorf("args %+v: got %v, want an error naming the plugin's args", args, err)
		}
	}
}

func TestPreFilterSkipsPodsWithoutGPUs(t *testing.T) {
	p := newPlugin(t, "http://127.0.0.1:1/toposched") // never called
	_, status := p.PreFilter(context.Background(), nil, gpuPod("web", 0), []fwk.NodeInfo{node("n1", nil)})
	if !status.IsSkip() {
		t.Fatalf("status %v, want Skip", status)
	}
}

// A fake serve's plan verb: records the offer and answers `answer` as its Filter part.
func fakeServe(t *testing.T, offered *[]string, answer func([]string) extenderv1.ExtenderFilterResult) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/toposched/plan" {
			http.NotFound(w, r)
			return
		}
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.Pod == nil || args.NodeNames == nil {
			t.Errorf("filter body: %v", err)
			return
		}
		*offered = *args.NodeNames
		_ = json.NewEncoder(w).Encode(planned{Filter: answer(*args.NodeNames)})
	}))
}

func TestPreFilterOffersTheUsableNodesAndAnswersThePlannedNode(t *testing.T) {
	var offered []string
	serve := fakeServe(t, &offered, func(names []string) extenderv1.ExtenderFilterResult {
		return extenderv1.ExtenderFilterResult{NodeNames: &[]string{names[len(names)-1]}}
	})
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	nodes := []fwk.NodeInfo{
		node("good-b", nil),
		node("cordoned", func(n *v1.Node) { n.Spec.Unschedulable = true }),
		node("tainted", func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
		}),
		node("small", func(n *v1.Node) { n.Status.Allocatable[GPUResource] = resource.MustParse("2") }),
		node("good-a", nil),
	}
	res, status := p.PreFilter(context.Background(), nil, gpuPod("train-0", 4), nodes)
	if !status.IsSuccess() {
		t.Fatalf("status %v", status)
	}
	if want := []string{"good-a", "good-b"}; !reflect.DeepEqual(offered, want) {
		t.Errorf("offered %v, want %v (sorted, without the cordoned, tainted and too small nodes)", offered, want)
	}
	if !res.NodeNames.Equal(sets.New("good-b")) {
		t.Errorf("PreFilterResult %v, want only good-b", res.NodeNames)
	}
}

func TestPreFilterWhenTheGroupDoesNotFitIsUnschedulableWithServesReason(t *testing.T) {
	var offered []string
	serve := fakeServe(t, &offered, func(names []string) extenderv1.ExtenderFilterResult {
		failed := extenderv1.FailedNodesMap{}
		for _, n := range names {
			failed[n] = "toposched: group k8s:ml:big (72 GPUs) cannot be placed whole"
		}
		return extenderv1.ExtenderFilterResult{FailedNodes: failed}
	})
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	_, status := p.PreFilter(context.Background(), nil, gpuPod("big-0", 8), []fwk.NodeInfo{node("n1", nil)})
	if status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), "cannot be placed whole") {
		t.Fatalf("status %v, want Unschedulable with serve's reason", status)
	}
}

func TestPreFilterWithServeDownIsAnErrorSoThePodIsRetriedWithBackOff(t *testing.T) {
	serve := httptest.NewServer(http.NotFoundHandler())
	url := serve.URL
	serve.Close() // nothing listens there now
	p := newPlugin(t, url+"/toposched")
	_, status := p.PreFilter(context.Background(), nil, gpuPod("train-0", 8), []fwk.NodeInfo{node("n1", nil)})
	if status.Code() != fwk.Error || !strings.Contains(status.Message(), "toposched plan") {
		t.Fatalf("status %v, want Error naming the verb", status)
	}
}
