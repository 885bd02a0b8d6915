package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// fakeDRA is claimStore in memory; setAllocation records every write.
type fakeDRA struct {
	claims  map[string]*resourceapi.ResourceClaim
	classes map[string]*resourceapi.DeviceClass
	slices  []*resourceapi.ResourceSlice
	writes  []string // "alloc ns/name dev,dev" | "dealloc ns/name"
}

func (f *fakeDRA) claim(ns, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := f.claims[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

func (f *fakeDRA) deviceClass(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := f.classes[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

func (f *fakeDRA) resourceSlices() ([]*resourceapi.ResourceSlice, error) { return f.slices, nil }

func (f *fakeDRA) allocatedDevices() (sets.Set[structured.DeviceID], error) {
	out := sets.New[structured.DeviceID]()
	for _, c := range f.claims {
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				out.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	return out, nil
}

func (f *fakeDRA) setAllocation(_ context.Context, claim *resourceapi.ResourceClaim, alloc *resourceapi.AllocationResult,
	pod *v1.Pod) (*resourceapi.ResourceClaim, error) {
	c := claim.DeepCopy()
	key := c.Namespace + "/" + c.Name
	if alloc == nil {
		c.Status.Allocation = nil
		delete(c.Annotations, PinnedForAnnotation)
		f.writes = append(f.writes, "dealloc "+key)
	} else {
		c.Status.Allocation = alloc.DeepCopy()
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[PinnedForAnnotation] = string(pod.UID)
		f.writes = append(f.writes, "alloc "+key+" "+strings.Join(deviceKeys(alloc), ","))
	}
	f.claims[key] = c
	return c, nil
}

func str(s string) *string { return &s }

// A GB200-like node: 4 GPUs, listed out of PCI order, named by a minor that is not the
// PCI order. PCI order: gpu-3 (0008), gpu-0 (0009), gpu-2 (0018), gpu-1 (0019).
func trayslice(node string) *resourceapi.ResourceSlice {
	dev := func(name, pci, root string) resourceapi.Device {
		return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type": {StringValue: str("gpu")}, "uuid": {StringValue: str("GPU-" + node + "-" + name)},
			"productName":                     {StringValue: str("NVIDIA GB200")},
			"resource.kubernetes.io/pciBusID": {StringValue: str(pci)},
			"resource.kubernetes.io/pcieRoot": {StringValue: str(root)},
		}}
	}
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"},
		Spec: resourceapi.ResourceSliceSpec{Driver: DefaultGPUDriver, NodeName: str(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{dev("gpu-0", "0009:01:00.0", "pci0009:00"), dev("gpu-1", "0019:01:00.0", "pci0019:00"),
				dev("gpu-2", "0018:01:00.0", "pci0018:00"), dev("gpu-3", "0008:01:00.0", "pci0008:00")}}}
}

func gpuClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: DefaultGPUDeviceClass},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}},
			Config: []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: DefaultGPUDriver,
					Parameters: runtime.RawExtension{Raw: []byte(`{"sharing":"none"}`)}}}}},
		}}
}

func exact(name, class string, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
}

func gpuClaimOf(pod string, requests ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: pod + "-gpus", Namespace: "ml"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}}}
}

// draPod: a pod whose claim "gpus" was generated from a template as `claim`.
func draPod(name, claim string) *v1.Pod {
	p := gpuPod(name, 0)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: str("gpu")}}
	p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: str(claim)}}
	return p
}

func newDRA(claims ...*resourceapi.ResourceClaim) *fakeDRA {
	f := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{},
		classes: map[string]*resourceapi.DeviceClass{DefaultGPUDeviceClass: gpuClass(),
			"nic.example.com": {ObjectMeta: metav1.ObjectMeta{Name: "nic.example.com"}}},
		slices: []*resourceapi.ResourceSlice{trayslice("n1"), trayslice("n2")}}
	for _, c := range claims {
		f.claims[c.Namespace+"/"+c.Name] = c
	}
	return f
}

// servePlanning: a fake serve whose plan verb answers `node` and the member's GPUs, and
// records the GPUs the pod was planned with.
func servePlanning(t *testing.T, node string, gpus []int, asked *int64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.Pod == nil {
			t.Errorf("plan body: %v", err)
			return
		}
		*asked = gpusOf(args.Pod)
		_ = json.NewEncoder(w).Encode(planned{Filter: extenderv1.ExtenderFilterResult{NodeNames: &[]string{node}},
			Member: &member{Job: "k8s:ml:pod:" + args.Pod.Name, Size: 1, Node: node, GPUs: gpus}})
	}))
}

func TestDemandCountsTheGPURequestsOfThePodsClaims(t *testing.T) {
	p := newPlugin(t, "http://127.0.0.1:1/toposched")
	one := exact("one", DefaultGPUDeviceClass, 0) // count 0 = the API's default, 1
	p.dra = newDRA(gpuClaimOf("a", exact("big", DefaultGPUDeviceClass, 3), one),
		&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "a-nic", Namespace: "ml"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{exact("nic", "nic.example.com", 1)}}}})
	pod := draPod("a", "a-gpus")
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, v1.PodResourceClaim{Name: "nic", ResourceClaimName: str("a-nic")})
	d, refused := p.demandOf(pod)
	if refused != nil {
		t.Fatal(refused.reason)
	}
	if d.gpus != 4 || len(d.claims) != 1 || d.claims[0].claim.Name != "a-gpus" {
		t.Fatalf("demand %+v: want 4 GPUs from claim a-gpus only (the NIC claim is DynamicResources')", d)
	}
}

func TestDemandRefusesWhatToposchedCannotPinWhole(t *testing.T) {
	all := exact("all", DefaultGPUDeviceClass, 0)
	all.Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	nicAll := exact("n", "nic.example.com", 0)
	nicAll.Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	cases := map[string]struct {
		claim      *resourceapi.ResourceClaim
		reason     string
		unresolved bool
	}{
		"all":     {gpuClaimOf("p", all), "allocationMode All", true},
		"mixed":   {gpuClaimOf("p", exact("g", DefaultGPUDeviceClass, 2), nicAll), "allocationMode All beside GPUs", true},
		"missing": {nil, "not found", false},
	}
	for name, c := range cases {
		p := newPlugin(t, "http://127.0.0.1:1/toposched")
		if c.claim != nil {
			p.dra = newDRA(c.claim)
		} else {
			p.dra = newDRA()
		}
		_, refused := p.demandOf(draPod("p", "p-gpus"))
		if refused == nil || !strings.Contains(refused.reason, c.reason) || refused.unresolved != c.unresolved {
			t.Errorf("%s: refusal %+v, want one containing %q (unresolvable %v)", name, refused, c.reason, c.unresolved)
		}
	}
	p := newPlugin(t, "http://127.0.0.1:1/toposched")
	p.dra = newDRA()
	pending := draPod("q", "")
	pending.Status.ResourceClaimStatuses = nil
	if _, refused := p.demandOf(pending); refused == nil || !strings.Contains(refused.reason, "waiting for the ResourceClaim") {
		t.Errorf("a claim not yet generated: %+v", refused)
	}
}

func TestPreFilterPinsTheClaimToThePlannedGPUsInPCIOrder(t *testing.T) {
	var asked int64
	serve := servePlanning(t, "n2", []int{2, 0}, &asked)
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	claim := gpuClaimOf("a", exact("gpus", DefaultGPUDeviceClass, 2))
	claim.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{Requests: []string{"gpus"},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: DefaultGPUDriver, Parameters: runtime.RawExtension{Raw: []byte(`{"mps":true}`)}}}}}
	dra := newDRA(claim)
	p.dra = dra
	res, status := p.PreFilter(context.Background(), nil, draPod("a", "a-gpus"), []fwk.NodeInfo{node("n1", nil), node("n2", nil)})
	if !status.IsSuccess() || !res.NodeNames.Equal(sets.New("n2")) {
		t.Fatalf("status %v, result %v", status, res)
	}
	if asked != 2 {
		t.Errorf("serve planned the pod with %d GPUs, want the claim's 2", asked)
	}
	// PCI order on n2: gpu-3, gpu-0, gpu-2, gpu-1: index 2 is gpu-2, index 0 is gpu-3.
	if want := []string{"alloc ml/a-gpus gpu.nvidia.com/n2/gpu-2,gpu.nvidia.com/n2/gpu-3"}; !reflect.DeepEqual(dra.writes, want) {
		t.Fatalf("writes %v, want %v", dra.writes, want)
	}
	alloc := dra.claims["ml/a-gpus"].Status.Allocation
	if got := alloc.Devices.Results[0].Device; got != "gpu-2" {
		t.Errorf("rank order: first device %s, want gpu-2 (toposched's GPU 2)", got)
	}
	if v := alloc.NodeSelector.NodeSelectorTerms[0].MatchFields[0]; v.Key != "metadata.name" || v.Values[0] != "n2" {
		t.Errorf("node selector %+v, want metadata.name in [n2]", v)
	}
	if len(alloc.Devices.Config) != 2 || alloc.Devices.Config[0].Source != resourceapi.AllocationConfigSourceClass ||
		alloc.Devices.Config[1].Source != resourceapi.AllocationConfigSourceClaim {
		t.Errorf("config %+v, want the class's then the claim's", alloc.Devices.Config)
	}
	// The same plan again (a retry): nothing rewritten.
	if _, status := p.PreFilter(context.Background(), nil, draPod("a", "a-gpus"), []fwk.NodeInfo{node("n2", nil)}); !status.IsSuccess() {
		t.Fatal(status)
	}
	if len(dra.writes) != 1 {
		t.Errorf("writes %v after a retry of the same plan, want none more", dra.writes)
	}
	// Bind's check: the claim holds the plan; another plan is refused.
	d, _ := p.demandOf(draPod("a", "a-gpus"))
	if err := p.checkPinned(draPod("a", "a-gpus"), d, "n2", []int{2, 0}); err != nil {
		t.Error(err)
	}
	if err := p.checkPinned(draPod("a", "a-gpus"), d, "n2", []int{1, 0}); err == nil {
		t.Error("checkPinned accepted devices other than the plan's")
	}
}

func TestPreFilterRefusesPlannedGPUsTheClaimDoesNotAdmitAndWritesNothing(t *testing.T) {
	selective := exact("gpus", DefaultGPUDeviceClass, 1)
	selective.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0019:00'"}}}
	pair := gpuClaimOf("c", exact("gpus", DefaultGPUDeviceClass, 2))
	root := resourceapi.FullyQualifiedName("resource.kubernetes.io/pcieRoot")
	pair.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: &root}}
	taken := gpuClaimOf("other", exact("gpus", DefaultGPUDeviceClass, 1))
	taken.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpus", Driver: DefaultGPUDriver, Pool: "n1", Device: "gpu-3"}}}}
	cases := []struct {
		name   string
		claim  *resourceapi.ResourceClaim
		gpus   []int
		reason string
	}{
		{"selector", gpuClaimOf("a", selective), []int{0}, "does not admit"}, // GPU 0 is on pci0008:00
		{"constraint", pair, []int{0, 1}, "break the constraint"},            // two pcieRoots
		{"held", gpuClaimOf("b", exact("gpus", DefaultGPUDeviceClass, 1)), []int{0}, "another claim holds"},
		{"out of range", gpuClaimOf("d", exact("gpus", DefaultGPUDeviceClass, 1)), []int{7}, "list 4 GPUs"},
	}
	for _, c := range cases {
		var asked int64
		serve := servePlanning(t, "n1", c.gpus, &asked)
		p := newPlugin(t, serve.URL+"/toposched")
		dra := newDRA(c.claim, taken)
		p.dra = dra
		pod := draPod(strings.TrimSuffix(c.claim.Name, "-gpus"), c.claim.Name)
		_, status := p.PreFilter(context.Background(), nil, pod, []fwk.NodeInfo{node("n1", nil)})
		serve.Close()
		if status.IsSuccess() || !strings.Contains(status.Message(), c.reason) {
			t.Errorf("%s: status %v, want a refusal containing %q", c.name, status, c.reason)
		}
		if len(dra.writes) != 0 {
			t.Errorf("%s: writes %v, want none", c.name, dra.writes)
		}
	}
}

func TestARePlannedPodsOldPinIsReplacedAndAnotherPodsIsNot(t *testing.T) {
	old := &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpus", Driver: DefaultGPUDriver, Pool: "n1", Device: "gpu-1"}}}}
	for _, mine := range []bool{true, false} {
		claim := gpuClaimOf("a", exact("gpus", DefaultGPUDeviceClass, 1))
		claim.Status.Allocation = old.DeepCopy()
		owner := "uid-a"
		if !mine {
			owner = "uid-someone-else"
		}
		claim.Annotations = map[string]string{PinnedForAnnotation: owner}
		var asked int64
		serve := servePlanning(t, "n1", []int{0}, &asked)
		p := newPlugin(t, serve.URL+"/toposched")
		dra := newDRA(claim)
		p.dra = dra
		_, status := p.PreFilter(context.Background(), nil, draPod("a", "a-gpus"), []fwk.NodeInfo{node("n1", nil)})
		serve.Close()
		want := []string{"dealloc ml/a-gpus", "alloc ml/a-gpus gpu.nvidia.com/n1/gpu-3"}
		if !mine {
			want = nil
		}
		if fmt.Sprint(dra.writes) != fmt.Sprint(want) || status.IsSuccess() != mine {
			t.Errorf("pinned for %s: status %v, writes %v, want %v", owner, status, dra.writes, want)
		}
	}
}

func TestUnreserveUndoesOnlyThePodsOwnPins(t *testing.T) {
	serve := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"released":""}`))
	}))
	defer serve.Close()
	p := newPlugin(t, serve.URL+"/toposched")
	alloc := &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpus", Driver: DefaultGPUDriver, Pool: "n1", Device: "gpu-0"}}}}
	mine, shared := gpuClaimOf("a", exact("gpus", DefaultGPUDeviceClass, 1)), gpuClaimOf("s", exact("gpus", DefaultGPUDeviceClass, 1))
	for _, c := range []*resourceapi.ResourceClaim{mine, shared} {
		c.Status.Allocation = alloc.DeepCopy()
		c.Annotations = map[string]string{PinnedForAnnotation: "uid-a"}
	}
	shared.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "b", UID: types.UID("uid-b")}}
	dra := newDRA(mine, shared)
	p.dra = dra
	pod := draPod("a", "a-gpus")
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, v1.PodResourceClaim{Name: "shared", ResourceClaimName: str("s-gpus")})
	p.Unreserve(context.Background(), nil, pod, "n1")
	if want := []string{"dealloc ml/a-gpus"}; !reflect.DeepEqual(dra.writes, want) {
		t.Errorf("writes %v, want %v (the claim another pod has reserved stays)", dra.writes, want)
	}
}

// nicSlice: a NIC driver's slice on `node`, one NIC per pcieRoot given, in that order (as
// dranet publishes them: pciBusID and pcieRoot, names not in PCI order).
func nicSlice(node string, roots ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-nic"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeName: str(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	for i, root := range roots {
		bus := strings.TrimPrefix(root, "pci")[:4] + fmt.Sprintf(":%02x:00.0", 2+i)
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("nic-%c", 'a'+i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"resource.kubernetes.io/pciBusID": {StringValue: str(bus)},
				"resource.kubernetes.io/pcieRoot": {StringValue: str(root)},
			}})
	}
	return s
}

// A claim of one GPU and one NIC with matchAttribute pcieRoot across both requests: the NIC
// pinned beside the planned GPU is the first free one on that GPU's root; without the
// constraint, the first free NIC; none free on that root: refused, nothing written.
func TestPreFilterPinsTheNICOnThePlannedGPUsPCIeRoot(t *testing.T) {
	root := resourceapi.FullyQualifiedName("resource.kubernetes.io/pcieRoot")
	claimOf := func(constrained bool) *resourceapi.ResourceClaim {
		c := gpuClaimOf("a", exact("gpu", DefaultGPUDeviceClass, 1), exact("nic", "nic.example.com", 1))
		if constrained {
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{Requests: []string{"gpu", "nic"}, MatchAttribute: &root}}
		}
		return c
	}
	// n1's NICs: nic-a on GPU 0's root, nic-b on GPU 3's, nic-c and nic-d on GPU 2's
	// (pci0018:00), nic-e on a root without GPUs.
	nics := nicSlice("n1", "pci0008:00", "pci0019:00", "pci0018:00", "pci0018:00", "pci0100:00")
	nicClass := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic.example.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'nic.example.com'"}}}}}
	cases := []struct {
		name        string
		constrained bool
		taken       []string // NICs another claim holds
		want        string   // the write, "" = refused
	}{
		{"constrained", true, nil, "alloc ml/a-gpus gpu.nvidia.com/n1/gpu-2,nic.example.com/n1/nic-c"},
		{"next on the root", true, []string{"nic-c"}, "alloc ml/a-gpus gpu.nvidia.com/n1/gpu-2,nic.example.com/n1/nic-d"},
		{"unconstrained", false, nil, "alloc ml/a-gpus gpu.nvidia.com/n1/gpu-2,nic.example.com/n1/nic-a"},
		{"root full", true, []string{"nic-c", "nic-d"}, ""},
	}
	for _, c := range cases {
		var asked int64
		serve := servePlanning(t, "n1", []int{2}, &asked) // GPU 2 in PCI order: gpu-2 on pci0018:00
		p := newPlugin(t, serve.URL+"/toposched")
		var held []resourceapi.DeviceRequestAllocationResult
		for _, n := range c.taken {
			held = append(held, resourceapi.DeviceRequestAllocationResult{Request: "nic", Driver: "nic.example.com", Pool: "n1", Device: n})
		}
		other := gpuClaimOf("other", exact("nic", "nic.example.com", int64(len(held))))
		if len(held) > 0 {
			other.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: held}}
		}
		dra := newDRA(claimOf(c.constrained), other)
		dra.classes["nic.example.com"] = nicClass
		dra.slices = append(dra.slices, nics)
		p.dra = dra
		_, status := p.PreFilter(context.Background(), nil, draPod("a", "a-gpus"), []fwk.NodeInfo{node("n1", nil)})
		defer serve.Close()
		if c.want == "" {
			if status.IsSuccess() || !strings.Contains(status.Message(), `request "nic": no free device`) || len(dra.writes) != 0 {
				t.Errorf("%s: status %v, writes %v: want a refusal naming the NIC request and no write", c.name, status, dra.writes)
			}
			continue
		}
		if !status.IsSuccess() {
			t.Fatalf("%s: %v", c.name, status)
		}
		if asked != 1 {
			t.Errorf("%s: serve planned %d GPUs, want 1 (the NIC is not a GPU)", c.name, asked)
		}
		if !reflect.DeepEqual(dra.writes, []string{c.want}) {
			t.Errorf("%s: writes %v, want [%s]", c.name, dra.writes, c.want)
		}
		d, _ := p.demandOf(draPod("a", "a-gpus"))
		if err := p.checkPinned(draPod("a", "a-gpus"), d, "n1", []int{2}); err != nil {
			t.Errorf("%s: Bind's check: %v", c.name, err)
		}
		// A retry of the same plan keeps the NIC and writes nothing.
		if _, status := p.PreFilter(context.Background(), nil, draPod("a", "a-gpus"), []fwk.NodeInfo{node("n1", nil)}); !status.IsSuccess() {
			t.Errorf("%s: retry: %v", c.name, status)
		}
		if len(dra.writes) != 1 {
			t.Errorf("%s: writes %v after a retry, want none more", c.name, dra.writes)
		}
	}
}
