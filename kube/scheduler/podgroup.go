package scheduler

// Kubernetes' own pod groups (KEP-4671, scheduling.k8s.io/v1beta1 in v1.37, feature gate
// GenericWorkload, beta and off by default): a pod joins a PodGroup through
// spec.schedulingGroup.podGroupName; a PodGroup with schedulingPolicy.gang needs minCount
// members scheduled together. kube-scheduler's pod group cycle (schedule_one_podgroup.go)
// then runs each member's PreFilter/Filter/Reserve in one cycle and its GangScheduling
// plugin holds them at Permit. Toposched's PreFilter asks serve to plan the whole group: the
// copy of the pod it sends carries the group as serve reads it (annotations
// toposched.io/pod-group and toposched.io/group-size, src/k8s/pod_request.h), so the first
// member's plan reserves every member's GPUs and each later member gets its planned node.
// A PodGroup with the basic policy (no gang) is no group: each pod is planned alone. A
// PodGroup's topology constraint (schedulingConstraints.topology[0].key, a node label every
// member must share; KEP-5732, gate TopologyAwareWorkloadScheduling) is passed as the group's
// required level, the way Kueue's required topology is (annotation
// kueue.x-k8s.io/podset-required-topology: serve resolves a node label such as
// fabric.topograph.run/tier-0 or kubernetes.io/hostname to its tier, and refuses one it
// cannot, with the reason).

import (
	"context"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

const (
	// PodGroupAnnotation and GroupSizeAnnotation name a pod's group for serve.
	PodGroupAnnotation  = "toposched.io/pod-group"
	GroupSizeAnnotation = "toposched.io/group-size"
	// RequiredTopologyAnnotation is where serve reads a group's required level.
	RequiredTopologyAnnotation = "kueue.x-k8s.io/podset-required-topology"
)

// podGroupSource reads PodGroups (kube-scheduler's PodGroupManager; a fake in tests).
type podGroupSource interface {
	podGroup(namespace, name string) (*schedulingv1beta1.PodGroup, error)
}

// managerPodGroups reads through kube-scheduler's PodGroupManager, which the scheduler
// fills from its PodGroup informer when GenericWorkload is on.
type managerPodGroups struct{ manager fwk.PodGroupManager }

func (m managerPodGroups) podGroup(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	return m.manager.PodGroups().Get(namespace, name)
}

// withNativeGroup is `pod` as serve is asked to plan it when it belongs to a gang PodGroup:
// a copy with the group's name and minCount (`pod` itself when it is in none). `base` is the
// pod serve would otherwise get (the pod, or its DRA stand-in), copied before changing. The
// PodGroup's topology key is passed as the required level unless every offered node has
// one value of it (a placement GeneratePlacements chose: the offer keeps the constraint).
func (p *Plugin) withNativeGroup(pod, base *v1.Pod, offered []fwk.NodeInfo) (*v1.Pod, *fwk.Status) {
	sg := pod.Spec.SchedulingGroup
	if sg == nil || sg.PodGroupName == nil || *sg.PodGroupName == "" {
		return base, nil
	}
	name := *sg.PodGroupName
	if p.podGroups == nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("pod is in PodGroup %q but this "+
			"kube-scheduler reads no PodGroups (feature gate GenericWorkload off)", name))
	}
	pg, err := p.podGroups.podGroup(pod.Namespace, name)
	if err != nil || pg == nil {
		// Retried when the PodGroup appears (GangScheduling's PreEnqueue normally holds the
		// pod back until then).
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("waiting for PodGroup %s/%s: %v", pod.Namespace, name, err))
	}
	return asGroupMember(pod, base, pg, offered)
}

// asGroupMember is withNativeGroup's answer for the pod's PodGroup `pg`.
func asGroupMember(pod, base *v1.Pod, pg *schedulingv1beta1.PodGroup, offered []fwk.NodeInfo) (*v1.Pod, *fwk.Status) {
	name := pg.Name
	gang := pg.Spec.SchedulingPolicy.Gang
	if gang == nil {
		return base, nil // the basic policy: no all-or-nothing group
	}
	if gang.MinCount < 1 {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s/%s: gang minCount %d",
			pod.Namespace, name, gang.MinCount))
	}
	out := base
	if out == pod {
		out = pod.DeepCopy()
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[PodGroupAnnotation] = name
	out.Annotations[GroupSizeAnnotation] = strconv.Itoa(int(gang.MinCount))
	if c := pg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 && c.Topology[0].Key != "" &&
		!constraintHolds(c.Topology[0].Key, offered) {
		if _, set := out.Annotations[RequiredTopologyAnnotation]; !set {
			out.Annotations[RequiredTopologyAnnotation] = c.Topology[0].Key
		}
	}
	return out, nil
}

// PodGroupPostFilter implements fwk.PodGroupPostFilterPlugin: kube-scheduler calls it when a
// pod group's cycle failed (after DefaultPreemption's, when that cannot help). Serve may hold
// the group's plan (a member was refused by another filter after the plan was made): it is
// released, as the Permit time-out does for groups scheduled pod by pod, so the next attempt
// plans the group afresh on the cluster as it is then. Never makes the group schedulable.
func (p *Plugin) PodGroupPostFilter(ctx context.Context, _ fwk.PodGroupCycleState, pg fwk.PodGroupInfo,
	_ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	for _, pod := range pg.GetUnscheduledPods() {
		if ok, _ := p.places(pod); !ok {
			continue
		}
		p.unpinClaims(ctx, pod)
		released, err := p.serve.unreserve(ctx, pod, "")
		if err != nil {
			// The reservation then expires in serve (--k8s-reservation-timeout).
			logger.Error(err, "toposched unreserve failed", "pod", klog.KObj(pod))
			continue
		}
		if released != "" {
			logger.V(2).Info("toposched released the plan of a pod group that could not be scheduled",
				"podGroup", pg.GetName(), "job", released)
		}
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, "toposched released the group's plan; it is planned again on the next attempt")
}
