package scheduler

// ComputeDomains (NVIDIA's DRA driver, dra-driver-nvidia-gpu: the namespaced custom resource
// `computedomains.resource.nvidia.com`). A ComputeDomain gives a multi-node job on a
// multi-node NVLink system (GB200/GB300 NVL72) an IMEX channel: its controller creates the
// ResourceClaimTemplate named in the ComputeDomain's spec.channel.resourceClaimTemplate.name,
// and every pod of the job names that template in spec.resourceClaims (each pod gets its own
// claim, of the driver's compute-domain-default-channel.nvidia.com DeviceClass). GPU memory
// is shared over NVLink only inside one NVLink domain (one rack), so a ComputeDomain whose
// pods land in several racks loses exactly what it was made for (kubernetes-sigs/
// dra-driver-nvidia-gpu #797, #804: kube-scheduler knows nothing of the domain).
//
// The plugin treats the pods that name one ComputeDomain's template as one group that must
// stay in one NVLink domain:
//   - PreFilter (a pod planned alone or the first member of a gang, outside a placement of
//     the pod group cycle): the offer is narrowed to one NVLink domain at a time, in this
//     order: the domains already holding pods of the ComputeDomain (most first); then the
//     others, those where kube-scheduler's free nvidia.com/gpu count holds every unassigned
//     pod of the ComputeDomain first, tightest first (so a later, larger job still finds a
//     whole rack), then the rest, most free first (when the pod is the only one of its
//     ComputeDomain the scheduler knows of, most free first: the job's size is unknown). Serve plans the pod (its whole gang) in the
//     first domain where it fits. Where it fits in none, the whole offer is given and serve's
//     engine spreads the group over as few domains as it can ("the fewest").
//   - GeneratePlacements (a gang PodGroup without a topology key, gate
//     TopologyAwareWorkloadScheduling): one candidate per NVLink domain, as a PodGroup with
//     the domain label as its key would get; none fitting: the parent placement (the fewest).
//
// An NVLink domain is the value of the first of Args.NVLinkDomainLabels a node carries
// (default nvidia.com/gpu.clique, which NVIDIA's GPU feature discovery sets, then
// accelerator.topograph.run/domain, which `toposched export --to k8s-labels` writes); nodes
// with neither are in no domain and offered only in the last, whole offer.
//
// The ComputeDomains are read through a dynamic informer of the version the API server
// prefers for resource.nvidia.com (v1beta1 and v1beta2 both carry
// spec.channel.resourceClaimTemplate.name), indexed by namespace and template. It is started
// in New when the API server serves the resource; one installed later is read after the
// scheduler restarts (New logs which). The extender does not read ComputeDomains.

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

const (
	// ComputeDomainGroup and ComputeDomainResource name NVIDIA's custom resource.
	ComputeDomainGroup    = "resource.nvidia.com"
	ComputeDomainResource = "computedomains"
	// CliqueLabel is the NVLink domain (clique) NVIDIA's GPU feature discovery labels a node with.
	CliqueLabel = "nvidia.com/gpu.clique"
	// TopographDomainLabel is the NVLink domain label `toposched export --to k8s-labels` writes.
	TopographDomainLabel = "accelerator.topograph.run/domain"
	// maxDomainTries bounds the plan calls one PreFilter makes domain by domain before the
	// whole offer (a failed plan holds nothing, but each is an engine run in serve).
	maxDomainTries = 16
	// templateIndex indexes ComputeDomains by "namespace/channel template name".
	templateIndex = "toposched/channel-template"
)

// computeDomainSource answers the ComputeDomain whose channel template is `template` in
// `namespace` (the informer's; a fake in tests). Safe for concurrent use.
type computeDomainSource interface {
	byTemplate(namespace, template string) (string, bool)
}

// computeDomain is the ComputeDomain a pod belongs to: its name and channel template.
type computeDomain struct {
	name, template string
}

// computeDomainOf: the ComputeDomain whose channel template one of the pod's claims is made
// from (nil: none, or the plugin reads no ComputeDomains).
func (p *Plugin) computeDomainOf(pod *v1.Pod) *computeDomain {
	if p.computeDomains == nil {
		return nil
	}
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil {
			continue
		}
		if name, ok := p.computeDomains.byTemplate(pod.Namespace, *pc.ResourceClaimTemplateName); ok {
			return &computeDomain{name: name, template: *pc.ResourceClaimTemplateName}
		}
	}
	return nil
}

// usesTemplate: the pod names `template` in its resource claims.
func usesTemplate(pod *v1.Pod, template string) bool {
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName != nil && *pc.ResourceClaimTemplateName == template {
			return true
		}
	}
	return false
}

// nvlinkDomainOf: the node's NVLink domain ("" and false: none).
func (p *Plugin) nvlinkDomainOf(node *v1.Node) (string, bool) {
	for _, l := range p.domainLabels {
		if v, ok := node.Labels[l]; ok && v != "" {
			return l + "=" + v, true
		}
	}
	return "", false
}

// domainOption is one NVLink domain a ComputeDomain member could be planned in.
type domainOption struct {
	name    string
	nodes   []fwk.NodeInfo
	members int   // pods of the ComputeDomain on its nodes (bound or assumed)
	free    int64 // nvidia.com/gpu not requested on its offered nodes
}

// freeGPUs: the node's nvidia.com/gpu allocatable less what its pods request.
func freeGPUs(info fwk.NodeInfo) int64 {
	free := info.GetAllocatable().GetScalarResources()[GPUResource] - info.GetRequested().GetScalarResources()[GPUResource]
	if free < 0 {
		return 0
	}
	return free
}

// domainOrder: the offered nodes by NVLink domain, in the order they are tried (see the file
// comment). `all` are every node of the snapshot (members of the ComputeDomain are counted on
// them, offerable or not); `need` is the GPUs the ComputeDomain's unassigned pods ask for,
// `per` the pod's own: need <= per (no other pod of the ComputeDomain known yet), the
// domains with the most room come first, the job's size being unknown.
func (p *Plugin) domainOrder(pod *v1.Pod, cd *computeDomain, offered, all []fwk.NodeInfo, need, per int64) []*domainOption {
	byName := map[string]*domainOption{}
	for _, info := range offered {
		d, ok := p.nvlinkDomainOf(info.Node())
		if !ok {
			continue
		}
		o := byName[d]
		if o == nil {
			o = &domainOption{name: d}
			byName[d] = o
		}
		o.nodes = append(o.nodes, info)
		o.free += freeGPUs(info)
	}
	for _, info := range all {
		d, ok := p.nvlinkDomainOf(info.Node())
		if !ok || byName[d] == nil {
			continue
		}
		for _, pi := range info.GetPods() {
			other := pi.GetPod()
			if other.UID != pod.UID && other.Namespace == pod.Namespace && usesTemplate(other, cd.template) {
				byName[d].members++
			}
		}
	}
	out := make([]*domainOption, 0, len(byName))
	for _, o := range byName {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.members > 0) != (b.members > 0) {
			return a.members > 0
		}
		if a.members > 0 {
			if a.members != b.members {
				return a.members > b.members
			}
			return a.name < b.name
		}
		if need <= per {
			// Only the pod itself is known: the job's size is not, so the most room first.
			if a.free != b.free {
				return a.free > b.free
			}
			return a.name < b.name
		}
		aHolds, bHolds := a.free >= need, b.free >= need
		if aHolds != bHolds {
			return aHolds
		}
		if a.free != b.free {
			if aHolds {
				return a.free < b.free // tightest fit first
			}
			return a.free > b.free // most room first
		}
		return a.name < b.name
	})
	return out
}

// unassignedNeed: the GPUs the ComputeDomain's pods without a node ask for, counting each as
// asking for `per` (the members of a job have one shape; a pod's own count is not at hand for
// DRA pods before their claims are read). At least `per` (the pod itself).
func (p *Plugin) unassignedNeed(pod *v1.Pod, cd *computeDomain, per int64) int64 {
	if p.pods == nil {
		return per
	}
	pods, err := p.pods.Pods(pod.Namespace).List(labels.Everything())
	if err != nil {
		return per
	}
	n := int64(0)
	for _, other := range pods {
		if other.Spec.NodeName == "" && other.DeletionTimestamp == nil && usesTemplate(other, cd.template) {
			n++
		}
	}
	if n == 0 {
		n = 1
	}
	return n * per
}

// planInComputeDomain plans the ComputeDomain member `pod` (serve's copy `base`) in one
// NVLink domain where it fits, else within the whole offer; see the file comment.
func (p *Plugin) planInComputeDomain(ctx context.Context, pod, base *v1.Pod, cd *computeDomain,
	offered, all []fwk.NodeInfo) (*planned, *fwk.Status) {
	logger := klog.FromContext(ctx)
	if m, err := p.serve.member(ctx, pod, ""); err == nil && m != nil && m.Job != "" {
		// Serve holds the group's plan already (a later member of a gang): it answers it.
		return p.planWithin(ctx, pod, base, offered)
	}
	per := gpusOf(base)
	options := p.domainOrder(pod, cd, offered, all, p.unassignedNeed(pod, cd, per), per)
	if len(options) > maxDomainTries {
		options = options[:maxDomainTries]
	}
	for _, o := range options {
		answer, status := p.planWithin(ctx, pod, base, o.nodes)
		if status != nil {
			return nil, status
		}
		res := &answer.Filter
		if res.Error != "" {
			return answer, nil // refused whatever the nodes (serve's reason)
		}
		if res.NodeNames != nil && len(*res.NodeNames) > 0 {
			logger.V(2).Info("toposched planned a ComputeDomain member in one NVLink domain", "pod", klog.KObj(pod),
				"computeDomain", cd.name, "domain", o.name, "membersThere", o.members)
			return answer, nil
		}
	}
	logger.V(2).Info("toposched: the ComputeDomain member fits in no single NVLink domain; planned over the "+
		"fewest", "pod", klog.KObj(pod), "computeDomain", cd.name, "domainsTried", len(options))
	return p.planWithin(ctx, pod, base, offered)
}

// informerComputeDomains reads ComputeDomains from a dynamic informer's index.
type informerComputeDomains struct{ indexer cache.Indexer }

func (s informerComputeDomains) byTemplate(namespace, template string) (string, bool) {
	objs, err := s.indexer.ByIndex(templateIndex, namespace+"/"+template)
	if err != nil || len(objs) == 0 {
		return "", false
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			names = append(names, u.GetName())
		}
	}
	if len(names) == 0 {
		return "", false
	}
	sort.Strings(names) // two ComputeDomains naming one template: the first by name
	return names[0], true
}

// channelTemplateKey is the index function: "namespace/spec.channel.resourceClaimTemplate.name".
func channelTemplateKey(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	name, found, err := unstructured.NestedString(u.Object, "spec", "channel", "resourceClaimTemplate", "name")
	if err != nil || !found || name == "" {
		return nil, nil
	}
	return []string{u.GetNamespace() + "/" + name}, nil
}

// computeDomainVersion: the version of resource.nvidia.com the API server prefers, when it
// serves computedomains in it ("" when it does not).
func computeDomainVersion(cfg *rest.Config) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		return "", err
	}
	for _, g := range groups.Groups {
		if g.Name != ComputeDomainGroup {
			continue
		}
		resources, err := dc.ServerResourcesForGroupVersion(g.PreferredVersion.GroupVersion)
		if err != nil {
			return "", err
		}
		for _, r := range resources.APIResources {
			if r.Name == ComputeDomainResource {
				return g.PreferredVersion.Version, nil
			}
		}
	}
	return "", nil
}

// startComputeDomains starts the informer of ComputeDomains when the API server serves them
// and waits (at most `wait`) for its first list; nil when they are not served.
func startComputeDomains(ctx context.Context, cfg *rest.Config, wait time.Duration) (computeDomainSource, error) {
	logger := klog.FromContext(ctx)
	version, err := computeDomainVersion(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovering %s: %w", ComputeDomainGroup, err)
	}
	if version == "" {
		logger.Info("toposched: the API server serves no ComputeDomains (" + ComputeDomainResource + "." +
			ComputeDomainGroup + "); they are not read until kube-scheduler restarts")
		return nil, nil
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	gvr := schema.GroupVersionResource{Group: ComputeDomainGroup, Version: version, Resource: ComputeDomainResource}
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, metav1.NamespaceAll, 0,
		cache.Indexers{templateIndex: channelTemplateKey}, nil)
	go inf.Informer().Run(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.Informer().HasSynced) {
		return nil, fmt.Errorf("the informer of %s did not sync in %s", gvr, wait)
	}
	logger.Info("toposched reads ComputeDomains", "version", gvr.GroupVersion().String())
	return informerComputeDomains{indexer: inf.Informer().GetIndexer()}, nil
}

// podLister is the scheduler's pod lister (kube-scheduler's informer; nil in unit tests).
type podLister = corelisters.PodLister
