// Package scheduler is toposched inside kube-scheduler: the Toposched plugin, registered
// with app.NewSchedulerCommand(app.WithPlugin(...)) by cmd/toposched-kube-scheduler. It holds
// no placement logic: every decision is a call to `toposched serve --k8s-extender`
// (docs/kubernetes.md, "The plugin build"), the same planner the extender asks.
//
// Per GPU pod: one asking for nvidia.com/gpu, or for GPUs through ResourceClaims (dra.go:
// PreFilter also pins the claims to the planned GPUs); other pods pass through (Skip):
//   - PreFilter: the nodes the pod could run on regardless of GPUs held by toposched
//     (schedulable, taints tolerated, required node affinity, requests fit) are offered to
//     serve's plan verb (its filter verb, plus the pod's group as planned), which plans the pod's whole group on the first member and holds
//     its GPUs; the answer, the pod's planned node, is the PreFilterResult. The group not
//     fitting: Unschedulable (retried on the next cluster event, as any unschedulable pod);
//     serve down: an Error (retried with back-off). Nothing is held either way.
//   - Permit: a pod alone passes; a member of a group of n waits until n members are bound or waiting here,
//     then all are allowed together; after PermitWaitSeconds the waiting members are
//     rejected and Unreserve gives everything back. A member that cannot be placed
//     therefore binds no member of its group (which the extender cannot promise).
//   - Unreserve: serve's unreserve verb releases the group when none of it is bound, and
//     the waiting siblings are rejected so the group is planned again whole.
//   - Bind: serve's bind verb posts the Binding with the toposched.io/gpus|ranks|rank|job
//     annotations (the same bytes as the extender's bind).
//
// Per gang PodGroup (podgroup.go; placement.go with TopologyAwareWorkloadScheduling):
// PlacementGenerate scores one candidate node set per domain of the PodGroup's topology key
// by serve's dry run and answers the best, which PreFilter's offer then keeps to;
// PodGroupPostFilter releases serve's plan of a group whose cycle failed.
//
// Thread-safety: kube-scheduler runs PreFilter and Permit on its scheduling goroutine and
// Bind and Unreserve on binding goroutines; the plugin's only state, the job of each
// waiting pod, is guarded by mu.
package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "Toposched"

// GPUResource is the extended resource the plugin places.
const GPUResource v1.ResourceName = "nvidia.com/gpu"

// Args are the plugin's pluginConfig args.
type Args struct {
	// URL of serve's extender verbs: its address and --url-prefix, e.g.
	// http://toposched.toposched.svc:7071/toposched. Required.
	URL string `json:"url"`
	// TimeoutSeconds bounds each call to serve (default 5).
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// PermitWaitSeconds is how long a group's members wait at Permit for the rest (default
	// 60; keep it below serve's --k8s-reservation-timeout, 300 s by default).
	PermitWaitSeconds int `json:"permitWaitSeconds,omitempty"`
	// GPUDriver is the DRA driver whose ResourceSlices list the GPUs (default gpu.nvidia.com).
	GPUDriver string `json:"gpuDriver,omitempty"`
	// GPUDeviceClasses: a claim's request of one of these DeviceClasses asks for GPUs that
	// toposched places (default [gpu.nvidia.com]).
	GPUDeviceClasses []string `json:"gpuDeviceClasses,omitempty"`
	// NVLinkDomainLabels: the node labels naming a node's NVLink domain, the first present
	// counting (default [nvidia.com/gpu.clique, accelerator.topograph.run/domain]); the pods
	// of one ComputeDomain are kept in one (computedomain.go).
	NVLinkDomainLabels []string `json:"nvlinkDomainLabels,omitempty"`
	// ComputeDomainSyncSeconds bounds the wait for the first list of ComputeDomains at
	// start-up (default 30).
	ComputeDomainSyncSeconds int `json:"computeDomainSyncSeconds,omitempty"`
}

// Plugin is the Toposched plugin; see the package comment.
type Plugin struct {
	handle     fwk.Handle
	serve      *client
	permitWait time.Duration

	// DRA (dra.go): nil without kube-scheduler's DRA manager (unit tests of the rest).
	dra        claimStore
	gpuDriver  string
	gpuClasses sets.Set[string]
	cel        *celCache

	// Kubernetes' own PodGroups (podgroup.go); nil without kube-scheduler's PodGroupManager.
	podGroups podGroupSource

	// NVIDIA ComputeDomains (computedomain.go); computeDomains nil when none are served (or
	// in unit tests of the rest), pods nil without kube-scheduler's informers.
	computeDomains computeDomainSource
	domainLabels   []string
	pods           podLister

	mu       sync.Mutex
	jobOfPod map[types.UID]string // waiting at Permit: the pod's job; guarded by mu
}

var (
	_ fwk.PreFilterPlugin = &Plugin{}
	_ fwk.ReservePlugin   = &Plugin{}
	_ fwk.PermitPlugin    = &Plugin{}
	_ fwk.BindPlugin      = &Plugin{}

	_ fwk.PodGroupPostFilterPlugin = &Plugin{}
)

// New is the plugin's factory for app.WithPlugin.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	var args Args
	if obj != nil {
		if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
			return nil, fmt.Errorf("%s args: %w", Name, err)
		}
	}
	if args.URL == "" {
		return nil, fmt.Errorf("%s args: url is required (toposched serve's address and --url-prefix, "+
			"e.g. http://toposched.toposched.svc:7071/toposched)", Name)
	}
	if !strings.HasPrefix(args.URL, "http://") && !strings.HasPrefix(args.URL, "https://") {
		return nil, fmt.Errorf("%s args: url %q: expected http://HOST:PORT/PREFIX", Name, args.URL)
	}
	if args.TimeoutSeconds < 0 || args.PermitWaitSeconds < 0 || args.ComputeDomainSyncSeconds < 0 {
		return nil, fmt.Errorf("%s args: timeoutSeconds, permitWaitSeconds and computeDomainSyncSeconds must be >= 0", Name)
	}
	timeout, wait := 5*time.Second, 60*time.Second
	if args.TimeoutSeconds > 0 {
		timeout = time.Duration(args.TimeoutSeconds) * time.Second
	}
	if args.PermitWaitSeconds > 0 {
		wait = time.Duration(args.PermitWaitSeconds) * time.Second
	}
	p := &Plugin{handle: h, serve: newClient(args.URL, timeout), permitWait: wait,
		gpuDriver: args.GPUDriver, gpuClasses: sets.New(args.GPUDeviceClasses...),
		cel: &celCache{compiled: map[string]dracel.CompilationResult{}}, jobOfPod: map[types.UID]string{}}
	if p.gpuDriver == "" {
		p.gpuDriver = DefaultGPUDriver
	}
	if p.gpuClasses.Len() == 0 {
		p.gpuClasses.Insert(DefaultGPUDeviceClass)
	}
	p.domainLabels = args.NVLinkDomainLabels
	if len(p.domainLabels) == 0 {
		p.domainLabels = []string{CliqueLabel, TopographDomainLabel}
	}
	if h != nil && h.PodGroupManager() != nil {
		p.podGroups = managerPodGroups{manager: h.PodGroupManager()}
	}
	if h != nil && h.SharedDRAManager() != nil {
		p.dra = &draStore{manager: h.SharedDRAManager(), client: h.ClientSet()}
	}
	if h != nil && h.KubeConfig() != nil {
		if h.SharedInformerFactory() != nil {
			p.pods = h.SharedInformerFactory().Core().V1().Pods().Lister()
		}
		wait := 30 * time.Second
		if args.ComputeDomainSyncSeconds > 0 {
			wait = time.Duration(args.ComputeDomainSyncSeconds) * time.Second
		}
		cds, err := startComputeDomains(ctx, h.KubeConfig(), wait)
		if err != nil {
			// Not fatal: without them the pods of a ComputeDomain are placed as any other
			// (the extender's behaviour), which the log says.
			klog.FromContext(ctx).Error(err, "toposched: ComputeDomains are not read")
		}
		p.computeDomains = cds
	}
	return p, nil
}

// Name implements fwk.Plugin.
func (p *Plugin) Name() string { return Name }

// podRequest is the pod's resource request, computed once per PreFilter (component-helpers'
// PodRequests, as kube-scheduler counts it). noderesources.Fits would recompute it for every
// node: 2.7 ms on 1,000 nodes, a quarter of the plugin's PreFilter. NodeResourcesFit still
// filters the planned node exactly.
type podRequest struct {
	milliCPU, memory, ephemeral int64
	scalar                      map[v1.ResourceName]int64
}

func requestOf(pod *v1.Pod) podRequest {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	r := podRequest{scalar: map[v1.ResourceName]int64{}}
	for name, q := range req {
		switch name {
		case v1.ResourceCPU:
			r.milliCPU = q.MilliValue()
		case v1.ResourceMemory:
			r.memory = q.Value()
		case v1.ResourceEphemeralStorage:
			r.ephemeral = q.Value()
		default:
			if q.Value() > 0 {
				r.scalar[name] = q.Value()
			}
		}
	}
	return r
}

// places: the pod is toposched's (it asks for nvidia.com/gpu, or for GPUs through
// ResourceClaims: then its demand, read from kube-scheduler's claim tracker, is returned).
func (p *Plugin) places(pod *v1.Pod) (bool, *draDemand) {
	if gpusOf(pod) > 0 {
		return true, nil
	}
	d, _ := p.demandOf(pod)
	return d != nil, d
}

// gpusOf is the pod's nvidia.com/gpu request (containers and init containers, as the
// scheduler counts it).
func gpusOf(pod *v1.Pod) int64 { return requestOf(pod).scalar[GPUResource] }

// fits: the node's allocatable less what its pods request leaves room for the pod.
func (r podRequest) fits(info fwk.NodeInfo) bool {
	alloc, used := info.GetAllocatable(), info.GetRequested()
	if len(info.GetPods())+1 > alloc.GetAllowedPodNumber() {
		return false
	}
	if r.milliCPU > 0 && r.milliCPU > alloc.GetMilliCPU()-used.GetMilliCPU() {
		return false
	}
	if r.memory > 0 && r.memory > alloc.GetMemory()-used.GetMemory() {
		return false
	}
	if r.ephemeral > 0 && r.ephemeral > alloc.GetEphemeralStorage()-used.GetEphemeralStorage() {
		return false
	}
	free, taken := alloc.GetScalarResources(), used.GetScalarResources()
	for name, want := range r.scalar {
		if want > free[name]-taken[name] {
			return false
		}
	}
	return true
}

// offerable: the node could take the pod as far as kube-scheduler's own state says, GPUs
// held in toposched aside (serve knows those): schedulable, every NoSchedule/NoExecute taint
// tolerated, required node affinity and nodeSelector matched, requests fitting.
func offerable(logger klog.Logger, pod *v1.Pod, affinity nodeaffinity.RequiredNodeAffinity, req podRequest,
	info fwk.NodeInfo) bool {
	node := info.Node()
	if node == nil {
		return false
	}
	if node.Spec.Unschedulable {
		unschedulable := v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
		if !corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, &unschedulable, false) {
			return false
		}
	}
	if len(node.Spec.Taints) > 0 {
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations,
			noScheduleTaint, false); untolerated {
			return false
		}
	}
	if ok, _ := affinity.Match(node); !ok {
		return false
	}
	return req.fits(info)
}

func noScheduleTaint(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}

// PreFilter plans the pod's group through serve and answers the pod's planned node.
func (p *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	req := requestOf(pod)
	demand, refused := p.demandOf(pod)
	if refused != nil {
		return nil, refused.status()
	}
	planPod := pod
	switch {
	case demand != nil && req.scalar[GPUResource] > 0:
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "the pod asks for GPUs both as "+
			string(GPUResource)+" and through ResourceClaims; toposched places one or the other")
	case demand != nil:
		planPod = withGPURequest(pod, demand.gpus) // serve plans it as a pod of that many GPUs
	case req.scalar[GPUResource] == 0:
		return nil, fwk.NewStatus(fwk.Skip)
	}
	logger := klog.FromContext(ctx)
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	offered := make([]fwk.NodeInfo, 0, len(nodes))
	within := placementNodes(state) // nil: every node
	for _, info := range nodes {
		if within != nil && !within.Has(info.Node().Name) {
			continue
		}
		if offerable(logger, pod, affinity, req, info) {
			offered = append(offered, info)
		}
	}
	var answer *planned
	var status *fwk.Status
	if cd := p.computeDomainOf(pod); cd != nil && within == nil && len(offered) > 0 {
		answer, status = p.planInComputeDomain(ctx, pod, planPod, cd, offered, nodes)
	} else {
		answer, status = p.planWithin(ctx, pod, planPod, offered)
	}
	if status != nil {
		return nil, status
	}
	res := &answer.Filter
	if res.Error != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, res.Error)
	}
	if res.NodeNames == nil || len(*res.NodeNames) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, firstReason(res))
	}
	if demand != nil {
		if answer.Member == nil {
			return nil, fwk.AsStatus(fmt.Errorf("toposched planned pod %s/%s but answered no member", pod.Namespace, pod.Name))
		}
		if status := p.pinClaims(ctx, pod, demand, answer.Member.Node, answer.Member.GPUs); status != nil {
			return nil, status
		}
	}
	if answer.Member != nil && state != nil {
		state.Write(memberKey, &plannedMember{*answer.Member})
	}
	return &fwk.PreFilterResult{NodeNames: sets.New(*res.NodeNames...)}, nil
}

// planWithin asks serve to plan the pod (serve's copy `base`, given its native group for
// `offered`) within the offered nodes. A status when the pod cannot be asked about (its
// PodGroup missing, no node offered) or serve did not answer; else serve's answer, which may
// place the pod nowhere.
func (p *Plugin) planWithin(ctx context.Context, pod, base *v1.Pod, offered []fwk.NodeInfo) (*planned, *fwk.Status) {
	planPod, status := p.withNativeGroup(pod, base, offered)
	if status != nil {
		return nil, status
	}
	if len(offered) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "no node can take the pod (schedulable, taints, affinity, requests)")
	}
	offer := make([]string, 0, len(offered))
	for _, info := range offered {
		offer = append(offer, info.Node().Name)
	}
	sort.Strings(offer) // the same offer for the same cluster, whatever the snapshot's order
	answer, err := p.serve.plan(ctx, planPod, offer)
	if err != nil {
		// Serve down or slow: an Error, not Unschedulable, so the pod is retried with
		// kube-scheduler's back-off (at most 10 s by default) rather than waiting for a cluster
		// event that serve's return would not cause. Nothing is held.
		return nil, fwk.AsStatus(err)
	}
	return answer, nil
}

// memberKey: the pod's group as serve planned it at PreFilter, read at Permit (one call to
// serve less in kube-scheduler's serial scheduling cycle).
const memberKey fwk.StateKey = Name + "/member"

type plannedMember struct{ member }

func (m *plannedMember) Clone() fwk.StateData { c := *m; return &c }

// firstReason: why serve left every node out (one reason for every node when a group cannot
// be placed whole), from the first node in name order.
func firstReason(res *extenderv1.ExtenderFilterResult) string {
	for _, failed := range []extenderv1.FailedNodesMap{res.FailedAndUnresolvableNodes, res.FailedNodes} {
		names := make([]string, 0, len(failed))
		for n := range failed {
			names = append(names, n)
		}
		if len(names) > 0 {
			sort.Strings(names)
			return failed[names[0]]
		}
	}
	return "toposched: no node for the pod"
}

// PreFilterExtensions implements fwk.PreFilterPlugin (none: the plan does not change when
// the preemption dry run adds or removes a pod).
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Reserve implements fwk.ReservePlugin: serve holds the GPUs from PreFilter on.
func (p *Plugin) Reserve(context.Context, fwk.CycleState, *v1.Pod, string) *fwk.Status { return nil }

// Unreserve gives back what the pod's attempt held and rejects its waiting siblings when
// the whole group was released. Not inside a pod group scheduling cycle: kube-scheduler
// v1.37's pod group algorithm (schedule_one_podgroup.go) runs every member's PreFilter to
// Reserve, then undoes each (Unreserve) before it assumes and reserves the members again for
// binding; serve's reservation is that plan and must survive the undo. A group whose cycle
// fails is released by PodGroupPostFilter (podgroup.go).
func (p *Plugin) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) {
	if ok, _ := p.places(pod); !ok {
		return
	}
	if state != nil && state.IsPodGroupSchedulingCycle() {
		return
	}
	logger := klog.FromContext(ctx)
	p.unpinClaims(ctx, pod)
	p.mu.Lock()
	delete(p.jobOfPod, pod.UID)
	p.mu.Unlock()
	released, err := p.serve.unreserve(ctx, pod, node)
	if err != nil {
		// The reservation then expires in serve (--k8s-reservation-timeout).
		logger.Error(err, "toposched unreserve failed", "pod", klog.KObj(pod))
		return
	}
	if released == "" {
		return
	}
	logger.V(2).Info("toposched released the group of an unreserved pod", "pod", klog.KObj(pod), "job", released)
	for _, uid := range p.waitingOf(released) {
		if wp := p.handle.GetWaitingPod(uid); wp != nil {
			wp.Reject(Name, fmt.Sprintf("toposched: a member of %s was unreserved; the group is planned again", released))
		}
	}
}

// waitingOf lists the pods waiting at Permit for `job`.
func (p *Plugin) waitingOf(job string) []types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []types.UID
	for uid, j := range p.jobOfPod {
		if j == job {
			out = append(out, uid)
		}
	}
	return out
}

// Permit holds a member until its whole group is bound or waiting.
func (p *Plugin) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) (*fwk.Status, time.Duration) {
	if ok, _ := p.places(pod); !ok {
		return nil, 0
	}
	m, err := p.memberAtPermit(ctx, state, pod, node)
	if err != nil {
		return fwk.NewStatus(fwk.Unschedulable, err.Error()), 0
	}
	if err := m.plannedOn(node); err != nil {
		return fwk.NewStatus(fwk.Unschedulable, err.Error()), 0
	}
	if m.Size <= 1 {
		return nil, 0
	}
	waiting := p.waitingOf(m.Job)
	if m.Bound+len(waiting)+1 < m.Size {
		p.mu.Lock()
		p.jobOfPod[pod.UID] = m.Job
		p.mu.Unlock()
		klog.FromContext(ctx).V(2).Info("toposched: member waits for its group", "pod", klog.KObj(pod), "job", m.Job,
			"bound", m.Bound, "waiting", len(waiting)+1, "size", m.Size)
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for the rest of %s", m.Job)), p.permitWait
	}
	for _, uid := range waiting {
		if wp := p.handle.GetWaitingPod(uid); wp != nil {
			wp.Allow(Name)
		}
	}
	p.mu.Lock()
	for _, uid := range waiting {
		delete(p.jobOfPod, uid)
	}
	p.mu.Unlock()
	return nil, 0
}

// memberAtPermit: the group PreFilter learnt in this cycle, else (no state) serve's answer now.
func (p *Plugin) memberAtPermit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) (*member, error) {
	if state != nil {
		if data, err := state.Read(memberKey); err == nil {
			if m, ok := data.(*plannedMember); ok {
				return &m.member, nil
			}
		}
	}
	return p.serve.member(ctx, pod, node)
}

// Bind has serve post the Binding with toposched's annotations; pods without GPUs go to
// the next bind plugin (DefaultBinder).
func (p *Plugin) Bind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	ok, demand := p.places(pod)
	if !ok {
		return fwk.NewStatus(fwk.Skip)
	}
	// Serve binds a pod it holds no slot for as a plain Binding (the extender's bind verb
	// also gets the pods without GPUs). A GPU pod whose reservation serve lost (it
	// restarted between this pod's PreFilter and its bind, or the reservation expired) must
	// not be bound without its GPUs: an Error makes kube-scheduler unreserve and schedule it
	// again, and its next PreFilter finds the group serve restored from its store.
	m, err := p.serve.member(ctx, pod, node)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if err := m.plannedOn(node); err != nil {
		return fwk.AsStatus(err)
	}
	if demand != nil {
		// DynamicResources' PreBind has reserved the claims; they must hold the planned GPUs.
		if err := p.checkPinned(pod, demand, node, m.GPUs); err != nil {
			return fwk.AsStatus(err)
		}
	}
	if err := p.serve.bind(ctx, pod, node); err != nil {
		return fwk.AsStatus(err)
	}
	return nil
}
