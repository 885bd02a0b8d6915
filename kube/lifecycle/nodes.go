package lifecycle

// Node availability: the controller also follows Node objects and tells `toposched serve`
// which nodes may take new jobs (PUT /v1/nodes/NAME/availability with source "k8s",
// docs/service.md "Node availability"). A node is unavailable while it is cordoned
// (spec.unschedulable), its Ready condition is not True, it carries a NoSchedule or
// NoExecute taint that is not tolerated (TolerateTaints), or it has no Node object (deleted,
// or never registered); it is available again once none of that holds. serve keeps the jobs
// already there (releasing them is their pods' business) and reports them.
//
// On start every node the informer lists and every node serve knows is reconciled once, so
// a node deleted or healed while the controller was down is caught up. What was last sent
// per node is remembered, so an update that changes nothing for availability (a heartbeat,
// a label) sends nothing.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// DefaultTolerateTaints: taints that do not make a node unavailable. GPU node pools are
// commonly tainted nvidia.com/gpu (GKE does it itself) so that only GPU pods land there, and
// those pods tolerate it (the ExtendedResourceToleration admission plugin adds the
// toleration to every pod requesting nvidia.com/gpu): toposched's jobs are such pods.
var DefaultTolerateTaints = []string{"nvidia.com/gpu"}

// maxReasonBytes is serve's limit on a reason (docs/service.md).
const maxReasonBytes = 256

// deletedReason is what serve shows for a node that has no Node object.
const deletedReason = "deleted (no Node object)"

// UnavailableReason says why a node may take no new jobs ("" when it may): "cordoned",
// "NotReady", "tainted KEY:EFFECT", joined by ", ". Taints whose key is in tolerated, and
// the taints Kubernetes sets for a condition already named (not-ready, unreachable,
// unschedulable), are not listed.
func UnavailableReason(node *corev1.Node, tolerated []string) string {
	var reasons []string
	if node.Spec.Unschedulable {
		reasons = append(reasons, "cordoned")
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		reasons = append(reasons, "NotReady")
	}
	for _, t := range node.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if taintTolerated(t.Key, tolerated) || (node.Spec.Unschedulable && t.Key == corev1.TaintNodeUnschedulable) ||
			(!ready && (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable)) {
			continue
		}
		reasons = append(reasons, fmt.Sprintf("tainted %s:%s", t.Key, t.Effect))
	}
	return truncateReason(strings.Join(reasons, ", "))
}

func taintTolerated(key string, tolerated []string) bool {
	for _, k := range tolerated {
		if k == key {
			return true
		}
	}
	return false
}

// truncateReason keeps a reason within serve's limit (taint keys are ASCII: qualified names).
func truncateReason(reason string) string {
	if len(reason) <= maxReasonBytes {
		return reason
	}
	return reason[:maxReasonBytes-3] + "..."
}

func (c *Controller) addNodeHandlers() error {
	enqueue := func(obj any) {
		name, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err == nil {
			c.nodeQueue.Add(name)
		}
	}
	_, err := c.nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	return err
}

// reconcileServeNodes queues every node serve knows, so one that has no Node object is
// marked (the informer's list already queued the others); retried with back-off (100 ms to
// 30 s) until serve answers.
func (c *Controller) reconcileServeNodes(ctx context.Context) {
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 30*time.Second) {
		names, err := c.toposched.Nodes(ctx)
		if err == nil {
			for _, name := range names {
				c.nodeQueue.Add(name)
			}
			klog.InfoS("reconciling node availability", "serve_nodes", len(names))
			return
		}
		klog.ErrorS(err, "listing serve's nodes to reconcile their availability; retrying", "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

func (c *Controller) nodeWork(ctx context.Context) {
	for processNext(ctx, c.nodeQueue, c.syncNode, "telling serve a node's availability") {
	}
}

// syncNode tells serve what the informer's cache says of the node, unless it was the last
// thing sent for it.
func (c *Controller) syncNode(ctx context.Context, name string) error {
	reason := deletedReason
	obj, exists, err := c.nodeInformer.GetStore().GetByKey(name)
	if err != nil {
		return err
	}
	if exists {
		reason = UnavailableReason(obj.(*corev1.Node), c.TolerateTaints)
	}
	c.mu.Lock()
	last, sent := c.nodeSent[name]
	c.mu.Unlock()
	if sent && last == reason {
		return nil
	}
	found, err := c.toposched.SetNodeAvailability(ctx, name, reason == "", reason)
	if err != nil {
		return err
	}
	if !found {
		klog.V(2).InfoS("serve's cluster has no such node; its availability is not followed", "node", name)
	} else if reason == "" {
		klog.InfoS("node available", "node", name)
	} else {
		klog.InfoS("node unavailable", "node", name, "reason", reason)
	}
	c.mu.Lock()
	c.nodeSent[name] = reason
	c.mu.Unlock()
	return nil
}
