package scheduler

// Pinning: the planned GPUs written into the pod's claims (PreFilter), checked at Bind, and
// undone when the attempt is unreserved. See dra.go.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// pinClaims writes the pod's planned GPUs (`planned`: local indices on `node`, serve's
// member answer, in rank order) into its GPU claims' allocations, claims and requests in the
// pod's order.
func (p *Plugin) pinClaims(ctx context.Context, pod *v1.Pod, d *draDemand, node string, planned []int) *fwk.Status {
	if len(planned) != d.gpus {
		return fwk.AsStatus(fmt.Errorf("toposched planned %d GPUs for pod %s/%s; its claims ask for %d",
			len(planned), pod.Namespace, pod.Name, d.gpus))
	}
	gpus, err := p.nodeGPUs(node)
	if err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	next := 0
	for _, gc := range d.claims {
		n := 0
		for _, r := range gc.requests {
			n += r.count
		}
		alloc, err := p.allocationFor(ctx, gc, node, gpus, planned[next:next+n])
		next += n
		if err != nil {
			return fwk.NewStatus(fwk.Unschedulable, err.Error())
		}
		if status := p.pin(ctx, pod, gc.claim, alloc); status != nil {
			return status
		}
	}
	return nil
}

// allocationFor is the claim's allocation on `node` with the planned GPUs, refused when a
// GPU breaks a selector or constraint of the claim.
func (p *Plugin) allocationFor(ctx context.Context, gc gpuClaim, node string, gpus []gpuDevice,
	planned []int) (*resourceapi.AllocationResult, error) {
	alloc := &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn,
			Values: []string{node}}}}}}}
	chosen := map[string][]gpuDevice{}
	k := 0
	for _, req := range gc.requests {
		for range req.count {
			index := planned[k]
			k++
			if index < 0 || index >= len(gpus) {
				return nil, fmt.Errorf("toposched planned GPU %d on %s, whose ResourceSlices of %s list %d GPUs "+
					"(the cluster model and the driver disagree)", index, node, p.gpuDriver, len(gpus))
			}
			g := gpus[index]
			if err := p.selectorsAdmit(ctx, req, g); err != nil {
				return nil, err
			}
			chosen[req.name] = append(chosen[req.name], g)
			alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{
				Request: req.name, Driver: p.gpuDriver, Pool: g.pool, Device: g.device.Name})
		}
	}
	if len(gc.others) > 0 {
		results, err := p.chooseOthers(ctx, gc, node, chosen)
		if err != nil {
			return nil, err
		}
		alloc.Devices.Results = append(alloc.Devices.Results, results...)
	}
	if err := constraintsHold(gc.claim, chosen); err != nil {
		return nil, err
	}
	alloc.Devices.Config = allocationConfig(gc)
	// Set now: an allocation is immutable once written, and DynamicResources' PreBind fills
	// a missing allocationTimestamp (v1.37, DRADeviceBindingConditions and
	// DRAResourceClaimDeviceStatus on by default) in the same update that adds the
	// reservation, which the API server then refuses ("field cannot be modified once set").
	alloc.AllocationTimestamp = &metav1.Time{Time: time.Now()}
	return alloc, nil
}

// chooseOthers picks, for each non-GPU request of the claim, the first free devices on
// `node` that the request's class and selectors admit and that keep the claim's constraints
// with what is chosen already (the planned GPUs first): a NIC that must share a pcieRoot with
// the claim's GPU is the first free NIC on that root. Adds them to `chosen`.
func (p *Plugin) chooseOthers(ctx context.Context, gc gpuClaim, node string,
	chosen map[string][]gpuDevice) ([]resourceapi.DeviceRequestAllocationResult, error) {
	devices, err := p.nodeDevices(node)
	if err != nil {
		return nil, err
	}
	taken, err := p.dra.allocatedDevices()
	if err != nil {
		return nil, err
	}
	used := sets.New[structured.DeviceID]()
	for _, ds := range chosen {
		for _, d := range ds {
			used.Insert(structured.MakeDeviceID(d.driver, d.pool, d.device.Name))
		}
	}
	var out []resourceapi.DeviceRequestAllocationResult
	for _, req := range gc.others {
		for range req.count {
			found := false
			for _, d := range devices {
				id := structured.MakeDeviceID(d.driver, d.pool, d.device.Name)
				if used.Has(id) || (taken.Has(id) && !heldBy(gc.claim, d)) || p.selectorsAdmit(ctx, req, d) != nil ||
					!admitsBeside(gc.claim, req.name, d, chosen) {
					continue
				}
				used.Insert(id)
				chosen[req.name] = append(chosen[req.name], d)
				out = append(out, resourceapi.DeviceRequestAllocationResult{Request: req.name, Driver: d.driver,
					Pool: d.pool, Device: d.device.Name})
				found = true
				break
			}
			if !found {
				return nil, fmt.Errorf("ResourceClaim %s/%s request %q: no free device of class %s on %s that its "+
					"selectors admit and that keeps the claim's constraints with the GPUs toposched planned",
					gc.claim.Namespace, gc.claim.Name, req.name, req.class.Name, node)
			}
		}
	}
	return out, nil
}

// heldBy: the device is in the claim's own current allocation (a retry of the same plan).
func heldBy(claim *resourceapi.ResourceClaim, d gpuDevice) bool {
	if claim.Status.Allocation == nil {
		return false
	}
	return slices.ContainsFunc(claim.Status.Allocation.Devices.Results, func(r resourceapi.DeviceRequestAllocationResult) bool {
		return r.Driver == d.driver && r.Pool == d.pool && r.Device == d.device.Name
	})
}

// allocationConfig is what a driver reads from the allocation: each class's configs, for
// the requests of that class, then the claim's own configs.
func allocationConfig(gc gpuClaim) []resourceapi.DeviceAllocationConfiguration {
	var out []resourceapi.DeviceAllocationConfiguration
	var classes []*resourceapi.DeviceClass
	requestsOf := map[string][]string{}
	for _, r := range slices.Concat(gc.requests, gc.others) {
		if _, seen := requestsOf[r.class.Name]; !seen {
			classes = append(classes, r.class)
		}
		requestsOf[r.class.Name] = append(requestsOf[r.class.Name], r.name)
	}
	for _, c := range classes {
		for _, cfg := range c.Spec.Config {
			out = append(out, resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClass,
				Requests: requestsOf[c.Name], DeviceConfiguration: cfg.DeviceConfiguration})
		}
	}
	for _, cfg := range gc.claim.Spec.Devices.Config {
		out = append(out, resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClaim,
			Requests: cfg.Requests, DeviceConfiguration: cfg.DeviceConfiguration})
	}
	return out
}

// deviceKeys: the allocation's devices as "driver/pool/device", sorted.
func deviceKeys(alloc *resourceapi.AllocationResult) []string {
	var out []string
	for _, r := range alloc.Devices.Results {
		out = append(out, r.Driver+"/"+r.Pool+"/"+r.Device)
	}
	sort.Strings(out)
	return out
}

// pin writes alloc into the claim, unless the claim holds exactly those devices already (a
// retry of the same plan). An allocation toposched wrote for this pod in an earlier attempt
// (its group was released and planned again) is replaced; any other is refused.
func (p *Plugin) pin(ctx context.Context, pod *v1.Pod, claim *resourceapi.ResourceClaim,
	alloc *resourceapi.AllocationResult) *fwk.Status {
	if old := claim.Status.Allocation; old != nil {
		if slices.Equal(deviceKeys(old), deviceKeys(alloc)) {
			return nil
		}
		if len(claim.Status.ReservedFor) > 0 || claim.Annotations[PinnedForAnnotation] != string(pod.UID) {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("ResourceClaim %s/%s is allocated (%s), not with the "+
				"GPUs toposched planned (%s)", claim.Namespace, claim.Name, strings.Join(deviceKeys(old), ","),
				strings.Join(deviceKeys(alloc), ",")))
		}
		var err error
		if claim, err = p.dra.setAllocation(ctx, claim, nil, pod); err != nil {
			return fwk.AsStatus(err)
		}
	}
	taken, err := p.dra.allocatedDevices()
	if err != nil {
		return fwk.AsStatus(err)
	}
	for _, r := range alloc.Devices.Results {
		if taken.Has(structured.MakeDeviceID(r.Driver, r.Pool, r.Device)) {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("toposched planned device %s/%s for ResourceClaim "+
				"%s/%s, which another claim holds", r.Pool, r.Device, claim.Namespace, claim.Name))
		}
	}
	if _, err := p.dra.setAllocation(ctx, claim, alloc, pod); err != nil {
		return fwk.AsStatus(err)
	}
	return nil
}

// checkPinned (Bind): the pod's GPU claims hold exactly the planned GPUs on `node`.
func (p *Plugin) checkPinned(pod *v1.Pod, d *draDemand, node string, planned []int) error {
	gpus, err := p.nodeGPUs(node)
	if err != nil {
		return err
	}
	var want, have []string
	for _, i := range planned {
		if i < 0 || i >= len(gpus) {
			return fmt.Errorf("toposched planned GPU %d on %s, which publishes %d", i, node, len(gpus))
		}
		want = append(want, p.gpuDriver+"/"+gpus[i].pool+"/"+gpus[i].device.Name)
	}
	for _, gc := range d.claims {
		if gc.claim.Status.Allocation == nil {
			return fmt.Errorf("ResourceClaim %s/%s is not allocated", gc.claim.Namespace, gc.claim.Name)
		}
		for _, r := range gc.claim.Status.Allocation.Devices.Results {
			if slices.ContainsFunc(gc.requests, func(q gpuRequest) bool { return q.name == r.Request }) {
				have = append(have, r.Driver+"/"+r.Pool+"/"+r.Device)
			}
		}
	}
	sort.Strings(want)
	sort.Strings(have)
	if !slices.Equal(want, have) {
		return fmt.Errorf("pod %s/%s: its claims hold %v, toposched planned %v", pod.Namespace, pod.Name, have, want)
	}
	return nil
}

// unpinClaims undoes the allocations toposched wrote for the pod, of claims no other pod
// has reserved (kube-scheduler calls Unreserve when the attempt failed: the GPUs go back).
func (p *Plugin) unpinClaims(ctx context.Context, pod *v1.Pod) {
	d, _ := p.demandOf(pod)
	if d == nil {
		return
	}
	for _, gc := range d.claims {
		c := gc.claim
		if c.Status.Allocation == nil || c.Annotations[PinnedForAnnotation] != string(pod.UID) {
			continue
		}
		if slices.ContainsFunc(c.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
			return r.UID != pod.UID
		}) {
			continue
		}
		if _, err := p.dra.setAllocation(ctx, c, nil, pod); err != nil {
			klog.FromContext(ctx).Error(err, "toposched: undoing a claim's allocation failed", "claim", klog.KObj(c))
		}
	}
}

// draStore is claimStore over kube-scheduler's SharedDRAManager and the API server.
type draStore struct {
	manager fwk.SharedDRAManager
	client  kubernetes.Interface
}

func (s *draStore) claim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	return s.manager.ResourceClaims().Get(namespace, name)
}

func (s *draStore) deviceClass(name string) (*resourceapi.DeviceClass, error) {
	return s.manager.DeviceClasses().Get(name)
}

func (s *draStore) resourceSlices() ([]*resourceapi.ResourceSlice, error) {
	return s.manager.ResourceSlices().ListWithDeviceTaintRules()
}

func (s *draStore) allocatedDevices() (sets.Set[structured.DeviceID], error) {
	return s.manager.ResourceClaims().ListAllAllocatedDevices()
}

// setAllocation: allocating adds the delete-protection finalizer and PinnedForAnnotation in a
// metadata update, then writes status.allocation (as DynamicResources' PreBind does for its
// own allocations); deallocating drops the pod from reservedFor and the allocation, then the
// finalizer and annotation. A conflict re-reads the claim and tries again. The result goes
// into the claim tracker (AssumeClaimAfterAPICall), so DynamicResources' PreFilter in this
// same cycle already sees the claim allocated.
func (s *draStore) setAllocation(ctx context.Context, claim *resourceapi.ResourceClaim,
	alloc *resourceapi.AllocationResult, pod *v1.Pod) (*resourceapi.ResourceClaim, error) {
	api := s.client.ResourceV1().ResourceClaims(claim.Namespace)
	c := claim.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var written *resourceapi.ResourceClaim
		var err error
		if alloc != nil {
			written, err = allocateClaim(ctx, api, c.DeepCopy(), alloc, pod)
		} else {
			written, err = deallocateClaim(ctx, api, c.DeepCopy(), pod)
		}
		if err == nil {
			c = written
		}
		if err != nil {
			if fresh, getErr := api.Get(ctx, claim.Name, metav1.GetOptions{}); getErr == nil {
				c = fresh // a conflict is retried on the claim as it is now
			} else {
				return err
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ResourceClaim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	if err := s.manager.ResourceClaims().AssumeClaimAfterAPICall(c); err != nil {
		klog.FromContext(ctx).V(4).Info("claim not assumed (the informer has a newer one)", "claim", klog.KObj(c), "err", err)
	}
	return c, nil
}

type claimAPI interface {
	Update(context.Context, *resourceapi.ResourceClaim, metav1.UpdateOptions) (*resourceapi.ResourceClaim, error)
	UpdateStatus(context.Context, *resourceapi.ResourceClaim, metav1.UpdateOptions) (*resourceapi.ResourceClaim, error)
}

func allocateClaim(ctx context.Context, api claimAPI, c *resourceapi.ResourceClaim, alloc *resourceapi.AllocationResult,
	pod *v1.Pod) (*resourceapi.ResourceClaim, error) {
	if c.Status.Allocation != nil {
		return nil, fmt.Errorf("allocated elsewhere in the meantime")
	}
	if !slices.Contains(c.Finalizers, resourceapi.Finalizer) || c.Annotations[PinnedForAnnotation] != string(pod.UID) {
		if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
			c.Finalizers = append(c.Finalizers, resourceapi.Finalizer)
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[PinnedForAnnotation] = string(pod.UID)
		var err error
		if c, err = api.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	}
	c.Status.Allocation = alloc.DeepCopy()
	return api.UpdateStatus(ctx, c, metav1.UpdateOptions{})
}

func deallocateClaim(ctx context.Context, api claimAPI, c *resourceapi.ResourceClaim,
	pod *v1.Pod) (*resourceapi.ResourceClaim, error) {
	if c.Status.Allocation != nil {
		c.Status.ReservedFor = slices.DeleteFunc(c.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
			return r.UID == pod.UID
		})
		if len(c.Status.ReservedFor) > 0 {
			return nil, fmt.Errorf("reserved for another consumer (%s): not deallocated", c.Status.ReservedFor[0].Name)
		}
		c.Status.Allocation = nil
		var err error
		if c, err = api.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	}
	c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == resourceapi.Finalizer })
	delete(c.Annotations, PinnedForAnnotation)
	return api.Update(ctx, c, metav1.UpdateOptions{})
}
