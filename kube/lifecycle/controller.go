// Package lifecycle follows the pods toposched placed through the scheduler extender and
// releases a job's GPUs in `toposched serve` (DELETE /v1/jobs/ID) once every member of the
// job has finished (phase Succeeded or Failed), been deleted, or is being deleted by
// kube-scheduler's preemption (condition DisruptionTarget, reason PreemptionByScheduler, and a
// deletionTimestamp).
//
// Why a preempted pod counts as ended before it is gone: kube-scheduler nominates the
// preemptor on the victim's node and offers that node to it the moment the victim's deletion
// completes. Released only then, the preemptor's filter call would race the release and, on
// losing, wait for another cluster event (up to kube-scheduler's 5-minute flush of
// unschedulable pods). The victim's GPUs stay in use while it terminates; nothing is bound
// there before kube-scheduler itself sees them free.
//
// It holds no placement logic: what it knows of a job comes from the annotations the
// extender's Binding put on each pod (toposched.io/job, toposched.io/rank, toposched.io/gpus)
// and from GET /v1/jobs/ID (the job's GPU count). The pods come from a client-go shared
// informer: list, then watch from the list's resourceVersion with bookmarks, a fresh list
// when the watch answers 410 Gone, reconnection with back-off; all of that is client-go's
// reflector.
//
// A job is released only when every rank of it (its GPUs / the GPUs of one member) has been
// seen on a pod and none of those pods is still live: a job whose members are still being
// bound is never released early.
//
// A pod deleted while this controller was not running is never seen as an event. The orphan
// sweep covers that: every Kubernetes job serve holds (an id starting "k8s:", the ids the
// extender gives) that no live annotated pod in the informer's cache belongs to for longer
// than OrphanGrace is released. The grace must exceed serve's --k8s-reservation-timeout: a
// group the extender has planned but whose first member is not bound yet has no annotated
// pod, and the extender itself expires it after that timeout.
//
// It also follows nodes and marks in serve the ones that may take no new jobs (nodes.go).
//
// Thread-safety: event handlers (informer goroutines), workers and the sweep share `jobs`
// and `nodeSent` under mu; `orphanSince` belongs to the sweep goroutine alone.
package lifecycle

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// The annotations the extender's bind verb writes on each pod (docs/kubernetes.md).
const (
	JobAnnotation  = "toposched.io/job"
	RankAnnotation = "toposched.io/rank"
	GPUsAnnotation = "toposched.io/gpus"
)

// Toposched is what the controller asks of `toposched serve`.
type Toposched interface {
	// JobGPUs returns how many GPUs the job holds; found is false when serve does not know it.
	JobGPUs(ctx context.Context, job string) (gpus int, found bool, err error)
	// Release releases the job's GPUs; releasing an unknown job is not an error.
	Release(ctx context.Context, job string) error
	// Jobs lists the ids of every job serve holds.
	Jobs(ctx context.Context) ([]string, error)
	// Hold places job on `gpus` GPUs of node (a pod placed by someone else); holding a job
	// serve already holds is not an error.
	Hold(ctx context.Context, job, node string, gpus int) error
	// SetNodeAvailability marks the node unavailable for reason (available false) or lifts
	// the mark (available true), as source "k8s"; found is false when serve has no such node.
	SetNodeAvailability(ctx context.Context, node string, available bool, reason string) (found bool, err error)
	// Nodes lists the names of serve's nodes.
	Nodes(ctx context.Context) ([]string, error)
}

// KubernetesJobPrefix starts the id of every job the extender places (docs/kubernetes.md).
const KubernetesJobPrefix = "k8s:"

// DefaultOrphanGrace is longer than serve's default --k8s-reservation-timeout (300 s).
const DefaultOrphanGrace = 6 * time.Minute

type member struct {
	rank  int
	gpus  int
	ended bool
}

// Controller follows pods and releases finished jobs; see the package comment.
type Controller struct {
	toposched Toposched
	informer  cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[string]

	nodeInformer cache.SharedIndexInformer
	nodeQueue    workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	jobs     map[string]map[string]member // job id -> pod UID -> what its annotations say
	nodeSent map[string]string            // node -> the reason last sent to serve ("" = available)

	// TolerateTaints: taint keys that do not make a node unavailable. Set before Run.
	TolerateTaints []string

	// OrphanGrace: how long a Kubernetes job may have no live annotated pod before the
	// sweep releases it; 0 turns the sweep off. Set before Run.
	OrphanGrace time.Duration
	now         func() time.Time
	orphanSince map[string]time.Time

	// HoldExternalPods: hold the GPUs of bound pods without toposched's annotations (external.go).
	// GPUResource is the extended resource they request. Set before Run.
	HoldExternalPods bool
	GPUResource      corev1.ResourceName
	held             map[string]bool   // under mu: external jobs serve holds
	externalNode     map[string]string // under mu: external job -> its pod's node
}

// New builds a controller over all namespaces' pods of client.
func New(client kubernetes.Interface, toposched Toposched) *Controller {
	factory := informers.NewSharedInformerFactory(client, 0)
	c := &Controller{
		toposched: toposched,
		informer:  factory.Core().V1().Pods().Informer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "toposched-jobs"}),
		nodeInformer: factory.Core().V1().Nodes().Informer(),
		nodeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "toposched-nodes"}),
		jobs:           map[string]map[string]member{},
		nodeSent:       map[string]string{},
		TolerateTaints: DefaultTolerateTaints,
		OrphanGrace:    DefaultOrphanGrace,
		now:            time.Now,
		orphanSince:    map[string]time.Time{},

		HoldExternalPods: true,
		GPUResource:      DefaultGPUResource,
		held:             map[string]bool{},
		externalNode:     map[string]string{},
	}
	_, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observe(obj, false) },
		UpdateFunc: func(_, obj any) { c.observe(obj, false) },
		DeleteFunc: func(obj any) { c.observe(obj, true) },
	})
	utilruntime.Must(err)
	utilruntime.Must(c.addNodeHandlers())
	return c
}

// Run starts the informer and `workers` workers and blocks until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	defer c.nodeQueue.ShutDown()
	go c.informer.Run(ctx.Done())
	go c.nodeInformer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced, c.nodeInformer.HasSynced) {
		return fmt.Errorf("pod and node informers did not sync")
	}
	klog.InfoS("following pods and nodes", "workers", workers)
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, c.work, time.Second)
	}
	go wait.UntilWithContext(ctx, c.nodeWork, time.Second)
	go c.reconcileServeNodes(ctx)
	if c.OrphanGrace > 0 {
		go wait.UntilWithContext(ctx, c.sweep, sweepInterval(c.OrphanGrace))
	}
	<-ctx.Done()
	return nil
}

// sweepInterval looks a few times per grace period, at most every 30 s.
func sweepInterval(grace time.Duration) time.Duration {
	return min(max(grace/4, 100*time.Millisecond), 30*time.Second)
}

// sweep releases the Kubernetes jobs serve holds that have had no live annotated pod for
// OrphanGrace (see the package comment). A failure is logged and retried next round.
func (c *Controller) sweep(ctx context.Context) {
	ids, err := c.toposched.Jobs(ctx)
	if err != nil {
		klog.ErrorS(err, "listing serve's jobs for the orphan sweep; retrying next round")
		return
	}
	held := map[string]bool{}
	now := c.now()
	for _, job := range ids {
		if !isKubernetesJob(job) {
			continue
		}
		held[job] = true
		if c.hasLiveMember(job) {
			delete(c.orphanSince, job)
			continue
		}
		since, seen := c.orphanSince[job]
		if !seen {
			c.orphanSince[job] = now
			continue
		}
		if now.Sub(since) < c.OrphanGrace {
			continue
		}
		if err := c.toposched.Release(ctx, job); err != nil {
			klog.ErrorS(err, "releasing an orphaned job; retrying next round", "job", job)
			continue
		}
		klog.InfoS("released a job no live pod belongs to", "job", job, "orphaned_for", now.Sub(since))
		delete(c.orphanSince, job)
		c.forget(job)
	}
	for job := range c.orphanSince {
		if !held[job] {
			delete(c.orphanSince, job)
		}
	}
}

// hasLiveMember reports whether a pod of job that has not ended is in the informer's cache.
func (c *Controller) hasLiveMember(job string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	members := c.jobs[job]
	return members != nil && !allEnded(members)
}

// HasSynced reports whether the informers' first lists have been delivered.
func (c *Controller) HasSynced() bool { return c.informer.HasSynced() && c.nodeInformer.HasSynced() }

func podOf(obj any) *corev1.Pod {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, _ := obj.(*corev1.Pod)
	return pod
}

// observe records what a pod event says of its job and queues the job when none of its
// members is live any more.
func (c *Controller) observe(obj any, deleted bool) {
	pod := podOf(obj)
	if pod == nil {
		return
	}
	job := pod.Annotations[JobAnnotation]
	if job == "" {
		c.observeExternal(pod, deleted)
		return
	}
	rank, err := strconv.Atoi(pod.Annotations[RankAnnotation])
	gpus := len(strings.Split(pod.Annotations[GPUsAnnotation], ","))
	if err != nil || pod.Annotations[GPUsAnnotation] == "" {
		klog.InfoS("pod has a toposched job but no usable rank or gpus annotation; ignored",
			"pod", klog.KObj(pod), "job", job)
		return
	}
	ended := deleted || podEnded(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	members := c.jobs[job]
	if members == nil {
		members = map[string]member{}
		c.jobs[job] = members
	}
	members[string(pod.UID)] = member{rank: rank, gpus: gpus, ended: ended}
	if allEnded(members) {
		c.queue.Add(job)
	}
}

// podEnded: the pod has finished, or is going as kube-scheduler's preemption victim.
func podEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		preemptedByScheduler(pod)
}

// preemptedByScheduler: kube-scheduler marked the pod as its preemption's victim and deleted it.
func preemptedByScheduler(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue &&
			c.Reason == corev1.PodReasonPreemptionByScheduler {
			return true
		}
	}
	return false
}

func allEnded(members map[string]member) bool {
	for _, m := range members {
		if !m.ended {
			return false
		}
	}
	return true
}

func (c *Controller) work(ctx context.Context) {
	for processNext(ctx, c.queue, c.sync, "releasing a finished job") {
	}
}

// processNext takes one key off queue and syncs it; a failed sync is retried with the
// queue's back-off. False once the queue shuts down.
func processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string],
	sync func(context.Context, string) error, what string) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	if err := sync(ctx, key); err != nil {
		klog.ErrorS(err, what+"; retrying with back-off", "key", key)
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}

// sync releases job when every rank was seen and every member has ended.
func (c *Controller) sync(ctx context.Context, job string) error {
	c.mu.Lock()
	members := c.jobs[job]
	ranks := map[int]bool{}
	gpusPerMember := 0
	for _, m := range members {
		ranks[m.rank] = true
		gpusPerMember = m.gpus
	}
	done := members != nil && allEnded(members)
	c.mu.Unlock()
	if !done {
		if strings.HasPrefix(job, ExternalJobPrefix) {
			return c.holdExternal(ctx, job)
		}
		return nil
	}
	total, found, err := c.toposched.JobGPUs(ctx, job)
	if err != nil {
		return err
	}
	if !found {
		c.forget(job)
		return nil
	}
	if want := total / gpusPerMember; len(ranks) < want {
		klog.InfoS("members ended before every rank was bound; the job stays held", "job", job,
			"ranks_seen", len(ranks), "ranks", want)
		return nil
	}
	if err := c.toposched.Release(ctx, job); err != nil {
		return err
	}
	klog.InfoS("released a finished job", "job", job, "gpus", total)
	c.forget(job)
	return nil
}

// forget drops a job's record unless a live member appeared meanwhile.
func (c *Controller) forget(job string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if members := c.jobs[job]; members != nil && allEnded(members) {
		delete(c.jobs, job)
		delete(c.held, job)
		delete(c.externalNode, job)
	}
}
