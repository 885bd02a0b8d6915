package scheduler

// DRA: pods whose GPUs come from ResourceClaims (resource.k8s.io/v1). The plugin reads the
// GPU count of each claim the pod uses (its requests of a GPU DeviceClass, allocationMode
// ExactCount), plans the pod through serve like an nvidia.com/gpu pod of that many GPUs, and
// pins the claim to the planned GPUs by writing the claim's allocation itself, in
// PreFilter, before DynamicResources' PreFilter reads the claim (the profile orders the two;
// docs/kubernetes.md, "DRA"). DynamicResources treats an allocated claim as allocated: its
// Filter only checks the allocation's node selector, its PreBind adds the pod to
// status.reservedFor, and its allocator counts the devices as taken for every other claim. So
// the devices a pod gets are exactly toposched's GPUs, without a second allocator deciding.
//
// Toposched's GPU i on a node is the node's i-th GPU in PCI bus order (the order nvidia-smi
// and CUDA_DEVICE_ORDER=PCI_BUS_ID number them): NVIDIA's DRA driver (v25.8 and later)
// publishes no index, but every GPU carries resource.kubernetes.io/pciBusID and uuid.
//
// A claim may mix GPU requests with requests for other devices (a NIC, exactly `count` of a
// DeviceClass): the plugin pins the whole claim, the GPUs as planned and, for each other
// request, the first free devices on the planned node that the class and request selectors
// admit and that keep the claim's constraints with the GPUs already chosen (a matchAttribute
// resource.kubernetes.io/pcieRoot across a GPU and a NIC request: the NIC on the GPU's root).
//
// Not handled (the pod is refused with a reason naming the claim, never half pinned):
// allocationMode All, firstAvailable alternatives, adminAccess, a pod asking for GPUs both as
// nvidia.com/gpu and through claims. Claims without GPU requests (a NIC claim of its own) are
// left to DynamicResources, which allocates them on the planned node.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

const (
	// DefaultGPUDriver is the DRA driver whose ResourceSlices list the GPUs toposched places
	// (NVIDIA's dra-driver-nvidia-gpu).
	DefaultGPUDriver = "gpu.nvidia.com"
	// DefaultGPUDeviceClass is the DeviceClass NVIDIA's driver installs for whole GPUs.
	DefaultGPUDeviceClass = "gpu.nvidia.com"
	// PCIBusIDAttribute orders a node's GPUs: toposched's GPU index i is the i-th.
	PCIBusIDAttribute resourceapi.QualifiedName = "resource.kubernetes.io/pciBusID"
	// PinnedForAnnotation on a claim names the pod (UID) whose plan toposched wrote into the
	// claim's allocation; only such allocations are undone by the plugin.
	PinnedForAnnotation = "toposched.io/pinned-for"
)

// claimStore is the DRA state the plugin reads and writes. The scheduler's implementation
// (draStore) reads through kube-scheduler's SharedDRAManager, which already holds the
// assumed claims of pods in flight, and writes through the API server; unit tests use a fake.
type claimStore interface {
	claim(namespace, name string) (*resourceapi.ResourceClaim, error)
	deviceClass(name string) (*resourceapi.DeviceClass, error)
	resourceSlices() ([]*resourceapi.ResourceSlice, error)
	allocatedDevices() (sets.Set[structured.DeviceID], error)
	// setAllocation writes alloc (nil: deallocate) into the claim's status, with the
	// finalizer and PinnedForAnnotation the allocation needs, and makes kube-scheduler's
	// claim tracker see the result at once.
	setAllocation(ctx context.Context, claim *resourceapi.ResourceClaim, alloc *resourceapi.AllocationResult,
		pod *v1.Pod) (*resourceapi.ResourceClaim, error)
}

// gpuRequest is one request of a claim for whole GPUs of a GPU DeviceClass.
type gpuRequest struct {
	name  string
	class *resourceapi.DeviceClass
	count int
	cel   []string // the request's own CEL selectors (the class's are in class)
}

// gpuClaim is one of the pod's claims with GPU requests; `others` are its requests for other
// devices (a NIC beside the GPUs), chosen by the plugin on the planned node.
type gpuClaim struct {
	claim    *resourceapi.ResourceClaim
	requests []gpuRequest
	others   []gpuRequest
}

// draDemand is what a pod asks of toposched through ResourceClaims.
type draDemand struct {
	claims []gpuClaim
	gpus   int
}

// refusal: a claim toposched cannot place (UnschedulableAndUnresolvable), or one that is not
// there yet (Unschedulable: retried when it appears).
type refusal struct {
	reason     string
	unresolved bool
}

func (r *refusal) status() *fwk.Status {
	if r.unresolved {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, r.reason)
	}
	return fwk.NewStatus(fwk.Unschedulable, r.reason)
}

// claimName is the name of the claim behind the pod's entry: the one it names, or the one
// generated from its template (pod.status.resourceClaimStatuses); "" while not generated.
func claimName(pod *v1.Pod, pc *v1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == pc.Name && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}

// demandOf reads the pod's GPU claims; nil when it has none.
func (p *Plugin) demandOf(pod *v1.Pod) (*draDemand, *refusal) {
	if p.dra == nil || len(pod.Spec.ResourceClaims) == 0 {
		return nil, nil
	}
	var d draDemand
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name := claimName(pod, pc)
		if name == "" {
			return nil, &refusal{reason: fmt.Sprintf("waiting for the ResourceClaim of pod claim %q to be created", pc.Name)}
		}
		claim, err := p.dra.claim(pod.Namespace, name)
		if err != nil {
			return nil, &refusal{reason: fmt.Sprintf("ResourceClaim %s/%s: %v", pod.Namespace, name, err)}
		}
		gc, r := p.gpuRequestsOf(claim)
		if r != nil {
			return nil, r
		}
		if len(gc.requests) > 0 {
			d.claims = append(d.claims, *gc)
			for _, req := range gc.requests {
				d.gpus += req.count
			}
		}
	}
	if len(d.claims) == 0 {
		return nil, nil
	}
	return &d, nil
}

// gpuRequestsOf sorts the claim's requests: GPU requests (of a class in p.gpuClasses) are
// toposched's; in a claim with GPU requests, the other requests (exactly `count` devices of
// another class) are pinned with them.
func (p *Plugin) gpuRequestsOf(claim *resourceapi.ResourceClaim) (*gpuClaim, *refusal) {
	gc := &gpuClaim{claim: claim}
	unpinnable := "" // a request of the claim the plugin could not pin beside its GPUs
	why := ""
	refuse := func(request, why string) (*gpuClaim, *refusal) {
		return nil, &refusal{unresolved: true, reason: fmt.Sprintf("ResourceClaim %s/%s request %q: %s",
			claim.Namespace, claim.Name, request, why)}
	}
	for _, req := range claim.Spec.Devices.Requests {
		if req.Exactly == nil {
			for _, sub := range req.FirstAvailable {
				if p.gpuClasses.Has(sub.DeviceClassName) {
					return refuse(req.Name, "firstAvailable alternatives of a GPU class are not placed by toposched; "+
						"ask for exactly: {deviceClassName, count}")
				}
			}
			unpinnable, why = req.Name, "firstAvailable alternatives beside GPUs are not pinned by toposched"
			continue
		}
		ex := req.Exactly
		gpu := p.gpuClasses.Has(ex.DeviceClassName)
		if ex.AllocationMode == resourceapi.DeviceAllocationModeAll {
			if gpu {
				return refuse(req.Name, "allocationMode All is not placed by toposched; ask for a count of GPUs")
			}
			unpinnable, why = req.Name, "allocationMode All beside GPUs is not pinned by toposched; ask for a count"
			continue
		}
		if ex.AdminAccess != nil && *ex.AdminAccess {
			if gpu {
				return refuse(req.Name, "adminAccess requests are not placed by toposched")
			}
			unpinnable, why = req.Name, "adminAccess requests beside GPUs are not pinned by toposched"
			continue
		}
		class, err := p.dra.deviceClass(ex.DeviceClassName)
		if err != nil {
			return nil, &refusal{reason: fmt.Sprintf("DeviceClass %s: %v", ex.DeviceClassName, err)}
		}
		count := int(ex.Count)
		if count == 0 {
			count = 1 // the API's default for ExactCount
		}
		r := gpuRequest{name: req.Name, class: class, count: count}
		for _, s := range ex.Selectors {
			if s.CEL != nil {
				r.cel = append(r.cel, s.CEL.Expression)
			}
		}
		if gpu {
			gc.requests = append(gc.requests, r)
		} else {
			gc.others = append(gc.others, r)
		}
	}
	if len(gc.requests) > 0 && unpinnable != "" {
		return refuse(unpinnable, why+" (put those devices in a claim of their own)")
	}
	return gc, nil
}

// withGPURequest is the pod as serve is asked to plan it: `gpus` nvidia.com/gpu on its first
// container (serve counts GPUs from the pod's requests).
func withGPURequest(pod *v1.Pod, gpus int) *v1.Pod {
	out := pod.DeepCopy()
	c := &out.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = v1.ResourceList{}
	}
	c.Resources.Requests[GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	return out
}

// gpuDevice is one device a node publishes (a GPU, or another device pinned beside GPUs).
type gpuDevice struct {
	driver string
	pool   string
	device resourceapi.Device
}

func (g gpuDevice) pciBusID() string {
	if a, ok := g.device.Attributes[PCIBusIDAttribute]; ok && a.StringValue != nil {
		return strings.ToLower(*a.StringValue)
	}
	return ""
}

// nodeGPUs lists the GPUs the driver publishes for `node` (the pools' current generation),
// in PCI bus order: index i is toposched's GPU i.
func (p *Plugin) nodeGPUs(node string) ([]gpuDevice, error) {
	all, err := p.dra.resourceSlices()
	if err != nil {
		return nil, err
	}
	generation := map[string]int64{}
	var mine []*resourceapi.ResourceSlice
	for _, s := range all {
		if s.Spec.Driver != p.gpuDriver || s.Spec.NodeName == nil || *s.Spec.NodeName != node {
			continue
		}
		mine = append(mine, s)
		generation[s.Spec.Pool.Name] = max(generation[s.Spec.Pool.Name], s.Spec.Pool.Generation)
	}
	var gpus []gpuDevice
	for _, s := range mine {
		if s.Spec.Pool.Generation != generation[s.Spec.Pool.Name] {
			continue // an older generation the driver is replacing
		}
		for _, d := range s.Spec.Devices {
			g := gpuDevice{driver: p.gpuDriver, pool: s.Spec.Pool.Name, device: d}
			if g.pciBusID() == "" {
				return nil, fmt.Errorf("ResourceSlice %s: device %s has no %s attribute (toposched numbers a node's GPUs "+
					"in PCI bus order)", s.Name, d.Name, PCIBusIDAttribute)
			}
			gpus = append(gpus, g)
		}
	}
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].pciBusID() < gpus[j].pciBusID() })
	return gpus, nil
}

// nodeDevices lists every device of any driver that the node's ResourceSlices (each pool's
// current generation) publish, sorted by driver, PCI bus id and name: the candidates for a
// claim's non-GPU requests.
func (p *Plugin) nodeDevices(node string) ([]gpuDevice, error) {
	all, err := p.dra.resourceSlices()
	if err != nil {
		return nil, err
	}
	generation := map[string]int64{}
	for _, s := range all {
		if s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			key := s.Spec.Driver + "/" + s.Spec.Pool.Name
			generation[key] = max(generation[key], s.Spec.Pool.Generation)
		}
	}
	var out []gpuDevice
	for _, s := range all {
		if s.Spec.NodeName == nil || *s.Spec.NodeName != node ||
			s.Spec.Pool.Generation != generation[s.Spec.Driver+"/"+s.Spec.Pool.Name] {
			continue
		}
		for _, d := range s.Spec.Devices {
			out = append(out, gpuDevice{driver: s.Spec.Driver, pool: s.Spec.Pool.Name, device: d})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.driver != b.driver {
			return a.driver < b.driver
		}
		if a.pciBusID() != b.pciBusID() {
			return a.pciBusID() < b.pciBusID()
		}
		return a.device.Name < b.device.Name
	})
	return out, nil
}

// celCache compiles each selector once. Thread-safe.
type celCache struct {
	mu       sync.Mutex
	compiled map[string]dracel.CompilationResult // guarded by mu
}

func (c *celCache) matches(ctx context.Context, expr, driver string, d *resourceapi.Device) (bool, error) {
	c.mu.Lock()
	r, ok := c.compiled[expr]
	if !ok {
		r = dracel.GetCompiler(dracel.Features{}).CompileCELExpression(expr, dracel.Options{})
		c.compiled[expr] = r
	}
	c.mu.Unlock()
	if r.Error != nil {
		return false, fmt.Errorf("selector %q: %v", expr, r.Error)
	}
	ok, _, err := r.DeviceMatches(ctx, dracel.Device{Driver: driver, Attributes: d.Attributes, Capacity: d.Capacity})
	if err != nil {
		return false, fmt.Errorf("selector %q on device %s: %v", expr, d.Name, err)
	}
	return ok, nil
}

// selectorsAdmit: the device satisfies the request's class selectors and its own.
func (p *Plugin) selectorsAdmit(ctx context.Context, req gpuRequest, g gpuDevice) error {
	exprs := slices.Clone(req.cel)
	for _, s := range req.class.Spec.Selectors {
		if s.CEL != nil {
			exprs = append(exprs, s.CEL.Expression)
		}
	}
	for _, e := range exprs {
		ok, err := p.cel.matches(ctx, e, g.driver, &g.device)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("toposched planned GPU %s (%s), which request %q's selector %q does not admit",
				g.device.Name, g.pciBusID(), req.name, e)
		}
	}
	return nil
}

// constraintsHold checks the claim's matchAttribute / distinctAttribute constraints on the
// devices chosen for its requests.
func constraintsHold(claim *resourceapi.ResourceClaim, chosen map[string][]gpuDevice) error {
	for _, c := range claim.Spec.Devices.Constraints {
		var attr *resourceapi.FullyQualifiedName
		distinct := false
		switch {
		case c.MatchAttribute != nil:
			attr = c.MatchAttribute
		case c.DistinctAttribute != nil:
			attr, distinct = c.DistinctAttribute, true
		default:
			continue
		}
		seen := map[string]bool{}
		for req, devices := range chosen {
			if len(c.Requests) > 0 && !slices.Contains(c.Requests, req) {
				continue
			}
			for _, g := range devices {
				seen[attributeText(g, *attr)] = true
			}
		}
		if (!distinct && len(seen) > 1) || (distinct && len(seen) < countOf(chosen, c.Requests)) {
			return fmt.Errorf("ResourceClaim %s/%s: toposched's GPUs break the constraint on %s", claim.Namespace,
				claim.Name, *attr)
		}
	}
	return nil
}

// admitsBeside: device g, chosen for request `req` beside the devices already chosen, keeps
// every matchAttribute (same value as those chosen; present) and distinctAttribute (a value
// none of them has) constraint of the claim that covers the request.
func admitsBeside(claim *resourceapi.ResourceClaim, req string, g gpuDevice, chosen map[string][]gpuDevice) bool {
	for _, c := range claim.Spec.Devices.Constraints {
		if len(c.Requests) > 0 && !slices.Contains(c.Requests, req) {
			continue
		}
		attr, distinct := c.MatchAttribute, false
		if attr == nil {
			attr, distinct = c.DistinctAttribute, true
		}
		if attr == nil {
			continue
		}
		mine := attributeText(g, *attr)
		if mine == "" {
			return false
		}
		for other, devices := range chosen {
			if len(c.Requests) > 0 && !slices.Contains(c.Requests, other) {
				continue
			}
			for _, d := range devices {
				if same := attributeText(d, *attr) == mine; same == distinct {
					return false
				}
			}
		}
	}
	return true
}

func countOf(chosen map[string][]gpuDevice, requests []string) int {
	n := 0
	for req, devices := range chosen {
		if len(requests) == 0 || slices.Contains(requests, req) {
			n += len(devices)
		}
	}
	return n
}

// attributeText: the device's value of a fully qualified attribute ("<domain>/<id>"; an
// attribute published without a domain belongs to the driver's), "" when absent.
func attributeText(g gpuDevice, name resourceapi.FullyQualifiedName) string {
	domain, id, _ := strings.Cut(string(name), "/")
	for k, a := range g.device.Attributes {
		key := string(k)
		if !strings.Contains(key, "/") {
			key = g.driver + "/" + key
		}
		if key == domain+"/"+id {
			return fmt.Sprint(deref(a.StringValue), deref(a.IntValue), deref(a.BoolValue), deref(a.VersionValue))
		}
	}
	return ""
}

func deref[T any](v *T) any {
	if v == nil {
		return nil
	}
	return *v
}
