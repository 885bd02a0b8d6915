package scheduler

// Topology-aware workload scheduling (KEP-5732; kube-scheduler v1.37, feature gate
// TopologyAwareWorkloadScheduling, alpha and off by default): in a pod group cycle,
// kube-scheduler asks the profile's first PlacementGenerate plugin for candidate placements
// (node sets), evaluates the group in each (every member's PreFilter to Reserve, then an
// undo) and keeps the one its PlacementScore plugins rank best
// (pkg/scheduler/schedule_one_podgroup.go, podGroupSchedulingPlacementAlgorithm). The
// built-in TopologyPlacementGenerator offers one placement per value of the PodGroup's
// topology key (schedulingConstraints.topology[0].key), in map order.
//
// Toposched's GeneratePlacements builds the same candidates (every value of the key among
// the nodes the members could run on; the whole offer when the PodGroup has no key), asks
// serve what it would place in each (the dry-run verb: the pod as PreFilter sends it, with
// the candidate's nodes as NodeNames, so the constraint holds whatever level the key names,
// an NVLink domain label included; serve builds the group's request from the pod exactly as
// it does for the plan, every annotation it reads included, and answers an engine dry run),
// and ranks them by the predicted per-step communication time of the group's plan there
// (predicted_comm_us: the cost model on the job's TP/PP/DP shape; compute is the same on
// equal GPUs, so it orders step times). It answers the best
// candidate only: serve reserves the group at its first member's PreFilter, so a second
// candidate evaluated after it could only fit where the first plan lies. Ties (predictions
// equal to a part in 10^6, as in every NVL72 rack, where all GPU pairs are NVLink) go to the
// tightest fit: the candidate with the fewest free GPUs (kube-scheduler's nvidia.com/gpu
// count), then the first in name order. First fit by name left a 16-GPU gang in an emptier
// rack than it needed, and a later 32-GPU gang found no rack whole (placement-compare,
// GB200, 2026-12-07). Candidates where the group does not fit are left out; none fitting is
// Unschedulable with serve's reason for the first.

import (
	"context"
	"fmt"
	"math"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

var _ fwk.PlacementGeneratePlugin = &Plugin{}

// placementKey: the nodes of the placement GeneratePlacements answered, in the pod group's
// cycle state. kube-scheduler hands every PreFilter all the snapshot's nodes, and filters to
// the placement only after it (schedule_one.go: findNodesThatFitPod); PreFilter offers serve
// only these, so the plan lies inside the placement.
const placementKey fwk.StateKey = Name + "/placement"

// chosenPlacement is placementKey's data; never changed once written.
type chosenPlacement struct{ nodes sets.Set[string] }

func (c *chosenPlacement) Clone() fwk.StateData { return c }

// placementNodes: the nodes of the placement Toposched generated for the pod's group cycle
// (nil outside one, or when the placement is another generator's).
func placementNodes(state fwk.CycleState) sets.Set[string] {
	if state == nil {
		return nil
	}
	placement := state.GetPlacementCycleState()
	if placement == nil {
		return nil
	}
	group := placement.GetPodGroupSchedulingCycle()
	if group == nil {
		return nil
	}
	data, err := group.Read(placementKey)
	if err != nil {
		return nil
	}
	if c, ok := data.(*chosenPlacement); ok {
		return c.nodes
	}
	return nil
}

// candidate is one node set the group could be placed in, with serve's prediction there.
type candidate struct {
	name      string
	nodes     []fwk.NodeInfo
	names     []string
	free      int64 // nvidia.com/gpu not requested on its nodes (freeGPUs)
	fits      bool
	commUS    float64 // predicted_comm_us; +Inf when serve gave none
	notFitWhy string
}

// GeneratePlacements implements fwk.PlacementGeneratePlugin; see the file comment. Pod
// groups that are not gangs of GPU pods, and gangs serve already holds a plan for, get the
// parent placement unchanged.
func (p *Plugin) GeneratePlacements(ctx context.Context, state fwk.PodGroupCycleState, pg fwk.PodGroupInfo,
	parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	whole := &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{parent}}
	group := pg.GetPodGroup()
	pods := pg.GetUnscheduledPods()
	if group == nil || group.Spec.SchedulingPolicy.Gang == nil || len(pods) == 0 {
		return whole, nil
	}
	pod := pods[0]
	ok, demand := p.places(pod)
	if !ok {
		return whole, nil
	}
	if m, err := p.serve.member(ctx, pod, ""); err == nil && m != nil && m.Job != "" {
		return whole, nil // planned already: every member's PreFilter answers that plan
	}
	key := ""
	if c := group.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		key = c.Topology[0].Key
	}
	domainOf := byLabel(key)
	cd := (*computeDomain)(nil)
	if key == "" {
		// A gang of a ComputeDomain without a key of its own: one candidate per NVLink
		// domain (computedomain.go); fitting in none, the parent placement, where serve
		// spreads it over the fewest.
		if cd = p.computeDomainOf(pod); cd != nil {
			domainOf = p.nvlinkDomainOf
		}
	}
	cands := candidates(klog.FromContext(ctx), pod, domainOf, parent.Nodes)
	if key == "" && cd == nil {
		// No key: the whole offer first, then each NVLink domain (a tie goes to the domain,
		// the tighter fit), so a group that fits in one rack is not split where serve's plan
		// over the whole offer would (at most maxDomainTries domains: one dry run each; a
		// node-sized domain, as on DGX H100, makes too many).
		if domains := candidates(klog.FromContext(ctx), pod, p.nvlinkDomainOf, parent.Nodes); len(domains) > 1 && len(domains) <= maxDomainTries {
			cands = append(cands, domains...)
		}
	}
	if cd != nil && len(cands) < 2 {
		return whole, nil
	}
	if len(cands) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("no node can take the members of PodGroup %s/%s "+
			"(schedulable, taints, affinity, requests%s)", pg.GetNamespace(), pg.GetName(), keyNote(key)))
	}
	base := pod
	if demand != nil {
		base = withGPURequest(pod, demand.gpus) // serve plans it as a pod of that many GPUs
	}
	for _, c := range cands {
		servePod, status := asGroupMember(pod, base, group, c.nodes)
		if status != nil {
			return nil, status
		}
		c.fits, c.commUS, c.notFitWhy = p.serve.dryRun(ctx, servePod, c.names)
	}
	best := bestCandidate(cands)
	if best == nil && cd != nil {
		klog.FromContext(ctx).V(2).Info("toposched: the ComputeDomain's gang fits in no single NVLink domain; "+
			"planned over the fewest", "podGroup", pg.GetName(), "computeDomain", cd.name, "domains", len(cands))
		return whole, nil
	}
	if best == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("toposched: PodGroup %s/%s fits in none of %d "+
			"candidate placements%s; first: %s", pg.GetNamespace(), pg.GetName(), len(cands), keyNote(key), cands[0].notFitWhy))
	}
	klog.FromContext(ctx).V(2).Info("toposched chose the pod group's placement", "podGroup", pg.GetName(),
		"placement", best.name, "predictedCommUs", best.commUS, "freeGPUs", best.free, "candidates", len(cands))
	if state != nil {
		state.Write(placementKey, &chosenPlacement{nodes: sets.New(best.names...)})
	}
	return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{{Name: "toposched:" + best.name, Nodes: best.nodes}}}, nil
}

func keyNote(key string) string {
	if key == "" {
		return ""
	}
	return ", topology key " + key
}

// byLabel: a node's domain is its value of `key` (none without the label); every node is in
// the one domain "all" when key is empty.
func byLabel(key string) func(*v1.Node) (string, bool) {
	if key == "" {
		return func(*v1.Node) (string, bool) { return "all", true }
	}
	return func(n *v1.Node) (string, bool) {
		v, ok := n.Labels[key]
		return v, ok
	}
}

// candidates: the nodes the pod could run on (offerable), by domain (domainOf; nodes in none
// left out, as the built-in generator leaves out nodes without the key's label), in name
// order.
func candidates(logger klog.Logger, pod *v1.Pod, domainOf func(*v1.Node) (string, bool), nodes []fwk.NodeInfo) []*candidate {
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	req := requestOf(pod)
	byName := map[string]*candidate{}
	for _, info := range nodes {
		if !offerable(logger, pod, affinity, req, info) {
			continue
		}
		name, has := domainOf(info.Node())
		if !has {
			continue
		}
		c := byName[name]
		if c == nil {
			c = &candidate{name: name}
			byName[name] = c
		}
		c.nodes = append(c.nodes, info)
		c.names = append(c.names, info.Node().Name)
		c.free += freeGPUs(info)
	}
	out := make([]*candidate, 0, len(byName))
	for _, c := range byName {
		sort.Strings(c.names)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// tieTolerance: predictions within this fraction of each other are equal (the cost model's
// sums over different GPUs of one shape may differ in their last bits).
const tieTolerance = 1e-6

// bestCandidate: the fitting candidate with the lowest predicted time; among equals the
// tightest fit (fewest free GPUs), then the first in `cands` (name order); nil when none
// fits.
func bestCandidate(cands []*candidate) *candidate {
	var best *candidate
	for _, c := range cands {
		if !c.fits {
			continue
		}
		if best == nil {
			best = c
			continue
		}
		equal := c.commUS == best.commUS ||
			math.Abs(c.commUS-best.commUS) <= tieTolerance*math.Max(math.Abs(c.commUS), math.Abs(best.commUS))
		if (!equal && c.commUS < best.commUS) || (equal && c.free < best.free) {
			best = c
		}
	}
	return best
}

// dryRun asks serve's dry-run verb what it would place for the pod's whole group within
// `nodes`, holding nothing: whether it fits, the predicted per-step communication time (+Inf
// when serve has none for the shape), and serve's reason when it does not fit (or the call
// failed). Serve builds the request from the pod itself (src/k8s/pod_request.cc), so every
// annotation it reads counts, not a copy of some of them made here.
func (c *client) dryRun(ctx context.Context, pod *v1.Pod, nodes []string) (bool, float64, string) {
	var out struct {
		Predicted *float64 `json:"predicted_comm_us"`
	}
	if _, err := c.post(ctx, "dry-run", extenderv1.ExtenderArgs{Pod: pod, NodeNames: &nodes}, &out); err != nil {
		return false, 0, err.Error()
	}
	if out.Predicted == nil {
		return true, math.Inf(1), ""
	}
	return true, *out.Predicted, ""
}

// constraintHolds: every offered node carries `key` with one value, so any plan within the
// offer keeps the group in one domain of that key (the offer of a placement Toposched
// generated): serve need not be told the level, which it could not resolve for every key
// (an NVLink domain label is not one of its tiers).
func constraintHolds(key string, offered []fwk.NodeInfo) bool {
	if key == "" || len(offered) == 0 {
		return false
	}
	first, has := offered[0].Node().Labels[key]
	if !has {
		return false
	}
	for _, info := range offered[1:] {
		if v, ok := info.Node().Labels[key]; !ok || v != first {
			return false
		}
	}
	return true
}
