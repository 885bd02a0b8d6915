package lifecycle

// Pods toposched did not place. A pod bound to a node by someone else (another scheduler,
// `spec.nodeName` set by its creator, pods bound before toposched was deployed) uses that
// node's GPUs all the same; serve must count them busy or it hands them out twice. Such a pod
// has no toposched.io/job annotation (the extender's and the plugin build's Bindings always
// write one). The controller holds its GPUs in serve as a job of its own, id
// "k8s-external:NAMESPACE:NAME" (Kubernetes names hold no colon), placed with `within_nodes`
// set to the pod's node (which of the node's GPUs does not matter to serve's counts: the
// device plugin chose them), and releases it like any job once the pod has finished or is
// gone. A hold serve refuses (the node already full in its view: two schedulers overlapped)
// is retried with back-off and logged; it succeeds once serve's jobs there end.

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ExternalJobPrefix starts the id of the job that holds an external pod's GPUs.
const ExternalJobPrefix = "k8s-external:"

// DefaultGPUResource is the extended resource NVIDIA's device plugin advertises.
const DefaultGPUResource = "nvidia.com/gpu"

func externalJobID(pod *corev1.Pod) string {
	return ExternalJobPrefix + pod.Namespace + ":" + pod.Name
}

// isKubernetesJob: a job this controller may release (the extender's, or an external pod's hold).
func isKubernetesJob(job string) bool {
	return strings.HasPrefix(job, KubernetesJobPrefix) || strings.HasPrefix(job, ExternalJobPrefix)
}

// podGPUs is the pod's effective request of the GPU resource as kube-scheduler counts it:
// the larger of the app containers' sum and the largest init container (extended resources
// are requested through limits; requests, when given, equal them).
func podGPUs(pod *corev1.Pod, name corev1.ResourceName) int64 {
	count := func(c corev1.Container) int64 {
		if q, ok := c.Resources.Limits[name]; ok {
			return q.Value()
		}
		if q, ok := c.Resources.Requests[name]; ok {
			return q.Value()
		}
		return 0
	}
	var sum int64
	for _, c := range pod.Spec.Containers {
		sum += count(c)
	}
	for _, c := range pod.Spec.InitContainers {
		sum = max(sum, count(c))
	}
	return sum
}

// observeExternal records a bound pod without toposched's annotations that requests GPUs, and
// queues its hold (or its release once it has ended).
func (c *Controller) observeExternal(pod *corev1.Pod, deleted bool) {
	if !c.HoldExternalPods || pod.Spec.NodeName == "" {
		return
	}
	gpus := podGPUs(pod, c.GPUResource)
	if gpus <= 0 {
		return
	}
	job := externalJobID(pod)
	ended := deleted || podEnded(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ended && c.held[job] {
		return // already held: status updates change nothing
	}
	c.jobs[job] = map[string]member{string(pod.UID): {rank: 0, gpus: int(gpus), ended: ended}}
	c.externalNode[job] = pod.Spec.NodeName
	c.queue.Add(job)
}

// holdExternal asks serve to hold an external pod's GPUs unless it already does.
func (c *Controller) holdExternal(ctx context.Context, job string) error {
	c.mu.Lock()
	members := c.jobs[job]
	node := c.externalNode[job]
	held := c.held[job]
	c.mu.Unlock()
	if held || members == nil || allEnded(members) {
		return nil
	}
	gpus := 0
	for _, m := range members {
		gpus = m.gpus
	}
	if err := c.toposched.Hold(ctx, job, node, gpus); err != nil {
		return err
	}
	klog.InfoS("holding the GPUs of a pod toposched did not place", "job", job, "node", node, "gpus", gpus)
	c.mu.Lock()
	c.held[job] = true
	c.mu.Unlock()
	return nil
}
