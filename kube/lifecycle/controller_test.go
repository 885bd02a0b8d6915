package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeServe is `toposched serve`'s /v1/jobs over HTTP: jobs with their GPU counts; it
// records DELETEs and can fail the first N of them.
type fakeServe struct {
	mu        sync.Mutex
	jobs      map[string]int
	released  []string
	failFirst int
	token     string
	// POST /v1/jobs: the holds made ("JOB on NODE x GPUS"), and how many to refuse first (422).
	holds       []string
	refuseHolds int
	// Node availability (nodes_test.go): serve's nodes with their "k8s" reason ("" =
	// available), every PUT received ("node=reason"), and how many PUTs fail with 503 first.
	nodes        map[string]string
	puts         []string
	failFirstPut int
}

func (f *fakeServe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/v1/nodes") {
		f.serveNodes(w, r)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/v1/jobs" {
		var parts []string
		for job := range f.jobs {
			parts = append(parts, fmt.Sprintf(`{"job":%q,"gpus":[]}`, job))
		}
		fmt.Fprintf(w, `{"jobs":[%s]}`, strings.Join(parts, ","))
		return
	}
	if r.Method == http.MethodPost && r.URL.Path == "/v1/jobs" {
		f.hold(w, r)
		return
	}
	job := strings.TrimPrefix(r.URL.Path, "/v1/jobs/")
	gpus, ok := f.jobs[job]
	switch {
	case r.Method == http.MethodGet && ok:
		parts := make([]string, gpus)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"rank":%d}`, i)
		}
		fmt.Fprintf(w, `{"job":%q,"gpus":[%s]}`, job, strings.Join(parts, ","))
	case r.Method == http.MethodDelete && r.Header.Get("Authorization") != "Bearer "+f.token:
		w.WriteHeader(http.StatusUnauthorized)
	case r.Method == http.MethodDelete && f.failFirst > 0:
		f.failFirst--
		w.WriteHeader(http.StatusServiceUnavailable)
	case r.Method == http.MethodDelete && ok:
		delete(f.jobs, job)
		f.released = append(f.released, job)
		fmt.Fprintf(w, `{"job":%q}`, job)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// hold is POST /v1/jobs as serve answers it: 401 without the token, 409 for a held id, 422
// while refusing; f.mu is held.
func (f *fakeServe) hold(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Job         string `json:"job"`
		GPUs        int    `json:"gpus"`
		WithinNodes string `json:"within_nodes"`
		Policy      string `json:"policy"`
	}
	switch {
	case r.Header.Get("Authorization") != "Bearer "+f.token:
		w.WriteHeader(http.StatusUnauthorized)
	case json.NewDecoder(r.Body).Decode(&req) != nil || req.Policy != "first-fit":
		w.WriteHeader(http.StatusBadRequest)
	case f.jobs[req.Job] > 0:
		w.WriteHeader(http.StatusConflict)
	case f.refuseHolds > 0:
		f.refuseHolds--
		w.WriteHeader(http.StatusUnprocessableEntity)
	default:
		f.jobs[req.Job] = req.GPUs
		f.holds = append(f.holds, fmt.Sprintf("%s on %s x %d", req.Job, req.WithinNodes, req.GPUs))
		w.WriteHeader(http.StatusCreated)
	}
}

func (f *fakeServe) heldJobs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.holds...)
}

func (f *fakeServe) releasedJobs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.released...)
}

func boundPod(name, job string, rank int, gpus string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name),
			Annotations: map[string]string{JobAnnotation: job, RankAnnotation: fmt.Sprint(rank), GPUsAnnotation: gpus}},
		Spec:   corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

type fixture struct {
	t      *testing.T
	client *fake.Clientset
	serve  *fakeServe
}

func start(t *testing.T, jobs map[string]int, failFirst int, pods ...*corev1.Pod) *fixture {
	t.Helper()
	return startWithGrace(t, DefaultOrphanGrace, jobs, failFirst, pods...)
}

func startWithGrace(t *testing.T, grace time.Duration, jobs map[string]int, failFirst int,
	pods ...*corev1.Pod) *fixture {
	t.Helper()
	return startServe(t, &fakeServe{jobs: jobs, failFirst: failFirst}, grace, pods...)
}

// startServe runs the controller against `serve` (its token set here) and the pods.
func startServe(t *testing.T, serve *fakeServe, grace time.Duration, pods ...*corev1.Pod) *fixture {
	t.Helper()
	serve.token = "s3cret"
	srv := httptest.NewServer(serve)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tokenFile := dir + "/token"
	if err := writeFile(tokenFile, "s3cret\n"); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := New(client, NewHTTPToposched(srv.URL, tokenFile))
	c.OrphanGrace = grace
	go func() { _ = c.Run(ctx, 1) }()
	// Events before the first list would race with it: a pod deleted before it is listed is
	// never seen as an event (the orphan sweep covers it), so the tests act only after the sync.
	deadline := time.Now().Add(10 * time.Second)
	for !c.HasSynced() {
		if time.Now().After(deadline) {
			t.Fatal("pod informer did not sync within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &fixture{t: t, client: client, serve: serve}
}

func (f *fixture) deletePod(name string) {
	f.t.Helper()
	if err := f.client.CoreV1().Pods("ml").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) finishPod(name string, phase corev1.PodPhase) {
	f.t.Helper()
	p, err := f.client.CoreV1().Pods("ml").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	p.Status.Phase = phase
	if _, err := f.client.CoreV1().Pods("ml").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// updatePod changes a pod as the API server would show it (the fake clientset keeps a
// deletionTimestamp set through Update).
func (f *fixture) updatePod(name string, change func(*corev1.Pod)) {
	f.t.Helper()
	p, err := f.client.CoreV1().Pods("ml").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	change(p)
	if _, err := f.client.CoreV1().Pods("ml").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// eventually waits up to 10 s for the released jobs to be want, then checks they stay so
// for a moment.
func (f *fixture) expectReleased(want ...string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && fmt.Sprint(f.serve.releasedJobs()) != fmt.Sprint(want) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if got := f.serve.releasedJobs(); fmt.Sprint(got) != fmt.Sprint(want) {
		f.t.Fatalf("released %v, want %v", got, want)
	}
}

func TestReleasedOnlyWhenEveryMemberIsDeleted(t *testing.T) {
	f := start(t, map[string]int{"k8s:ml:g": 16, "k8s:ml:other": 8}, 0,
		boundPod("g-0", "k8s:ml:g", 0, "0,1,2,3,4,5,6,7"), boundPod("g-1", "k8s:ml:g", 1, "0,1,2,3,4,5,6,7"),
		boundPod("other-0", "k8s:ml:other", 0, "0,1,2,3,4,5,6,7"))
	f.deletePod("g-0")
	f.expectReleased()
	f.deletePod("g-1")
	f.expectReleased("k8s:ml:g")
}

func TestReleasedWhenMembersFinish(t *testing.T) {
	f := start(t, map[string]int{"k8s:ml:g": 4}, 0,
		boundPod("g-0", "k8s:ml:g", 0, "0,1"), boundPod("g-1", "k8s:ml:g", 1, "2,3"))
	f.finishPod("g-0", corev1.PodSucceeded)
	f.expectReleased()
	f.finishPod("g-1", corev1.PodFailed)
	f.expectReleased("k8s:ml:g")
}

// What kube-scheduler's preemption does to a victim: the DisruptionTarget condition, then a
// graceful delete (a deletionTimestamp; the kubelet would confirm it later). The job is
// released then; a pod merely being deleted, or only marked, is not ended.
func TestReleasedWhenPreemptedBeforeTheDeletionCompletes(t *testing.T) {
	f := start(t, map[string]int{"k8s:ml:pod:low": 8, "k8s:ml:pod:slow": 8, "k8s:ml:pod:marked": 8}, 0,
		boundPod("low", "k8s:ml:pod:low", 0, "0,1,2,3,4,5,6,7"),
		boundPod("slow", "k8s:ml:pod:slow", 0, "0,1,2,3,4,5,6,7"),
		boundPod("marked", "k8s:ml:pod:marked", 0, "0,1,2,3,4,5,6,7"))
	victim := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonPreemptionByScheduler}
	f.updatePod("low", func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, victim)
		now := metav1.Now()
		p.DeletionTimestamp = &now
	})
	f.updatePod("slow", func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp = &now // a graceful delete by someone else: its GPUs are still in use
	})
	f.updatePod("marked", func(p *corev1.Pod) { p.Status.Conditions = append(p.Status.Conditions, victim) })
	f.expectReleased("k8s:ml:pod:low")
}

func TestNotReleasedBeforeEveryRankWasBound(t *testing.T) {
	// 3 members of 8 GPUs; only rank 0 was ever seen bound: its deletion releases nothing.
	f := start(t, map[string]int{"k8s:ml:g": 24}, 0, boundPod("g-0", "k8s:ml:g", 0, "0,1,2,3,4,5,6,7"))
	f.deletePod("g-0")
	f.expectReleased()
}

func TestPodsWithoutToposchedAnnotationsAreIgnored(t *testing.T) {
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ml", UID: "uid-web"}}
	f := start(t, map[string]int{"k8s:ml:pod:web": 1}, 0, plain)
	f.deletePod("web")
	f.expectReleased()
}

func TestReleaseRetriedWithBackOff(t *testing.T) {
	f := start(t, map[string]int{"k8s:ml:pod:solo": 1}, 3, boundPod("solo", "k8s:ml:pod:solo", 0, "5"))
	f.deletePod("solo")
	f.expectReleased("k8s:ml:pod:solo")
}

func TestJobAlreadyGoneFromServe(t *testing.T) {
	f := start(t, map[string]int{}, 0, boundPod("solo", "k8s:ml:pod:solo", 0, "5"))
	f.deletePod("solo")
	f.expectReleased()
}

func TestOrphanedJobsReleasedAfterTheGrace(t *testing.T) {
	// As after a restart: serve holds three Kubernetes jobs and one of its own; the pods of
	// k8s:ml:gone were deleted while the controller was down (none is listed), k8s:ml:live
	// has a running member, k8s:ml:done's only member has Succeeded but rank 1 was never
	// seen. Only the jobs without a live pod go, and only after the grace.
	f := startWithGrace(t, 400*time.Millisecond,
		map[string]int{"k8s:ml:gone": 8, "k8s:ml:live": 8, "k8s:ml:done": 16, "slurm-42": 4}, 0,
		boundPod("live-0", "k8s:ml:live", 0, "0,1,2,3,4,5,6,7"),
		func() *corev1.Pod {
			p := boundPod("done-0", "k8s:ml:done", 0, "0,1,2,3,4,5,6,7")
			p.Status.Phase = corev1.PodSucceeded
			return p
		}())
	time.Sleep(200 * time.Millisecond)
	if got := f.serve.releasedJobs(); len(got) != 0 {
		t.Fatalf("released %v before the grace", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && len(f.serve.releasedJobs()) < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(600 * time.Millisecond) // two more sweeps: nothing else goes
	got := f.serve.releasedJobs()
	if fmt.Sprint(sorted(got)) != "[k8s:ml:done k8s:ml:gone]" {
		t.Fatalf("released %v, want k8s:ml:done and k8s:ml:gone", got)
	}
	// A member of the live job goes too: then it is orphaned and released after the grace.
	f.deletePod("live-0")
	f.expectReleasedEventually("k8s:ml:live")
}

func TestOrphanSweepOff(t *testing.T) {
	f := startWithGrace(t, 0, map[string]int{"k8s:ml:gone": 8}, 0)
	time.Sleep(500 * time.Millisecond)
	if got := f.serve.releasedJobs(); len(got) != 0 {
		t.Fatalf("released %v with the sweep off", got)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func (f *fixture) expectReleasedEventually(job string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, j := range f.serve.releasedJobs() {
			if j == job {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.t.Fatalf("%s not released within 10 s (released: %v)", job, f.serve.releasedJobs())
}

func writeFile(path, text string) error {
	return os.WriteFile(path, []byte(text), 0o600)
}

// externalPod is a pod bound to node by someone else: no toposched annotations, `gpus` of
// nvidia.com/gpu in its one container.
func externalPod(name, node string, gpus int64) *corev1.Pod {
	limits := corev1.ResourceList{}
	if gpus > 0 {
		limits[DefaultGPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Limits: limits}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func (f *fixture) expectHeld(want ...string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && fmt.Sprint(sorted(f.serve.heldJobs())) != fmt.Sprint(want) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if got := sorted(f.serve.heldJobs()); fmt.Sprint(got) != fmt.Sprint(want) {
		f.t.Fatalf("held %v, want %v", got, want)
	}
}

func TestExternalPodsGPUsHeldUntilThePodEnds(t *testing.T) {
	unbound := externalPod("pending", "", 8)
	noGPU := externalPod("web", "n3", 0)
	f := start(t, map[string]int{}, 0, externalPod("a", "n1", 2), externalPod("b", "n2", 8), unbound, noGPU,
		boundPod("placed", "k8s:ml:pod:placed", 0, "0,1"))
	f.expectHeld("k8s-external:ml:a on n1 x 2", "k8s-external:ml:b on n2 x 8")
	f.finishPod("a", corev1.PodSucceeded)
	f.expectReleased("k8s-external:ml:a")
	f.deletePod("b")
	f.expectReleased("k8s-external:ml:a", "k8s-external:ml:b")
	// Bound later (as another scheduler binds it): held then.
	f.updatePod("pending", func(p *corev1.Pod) { p.Spec.NodeName = "n4" })
	f.expectHeld("k8s-external:ml:a on n1 x 2", "k8s-external:ml:b on n2 x 8", "k8s-external:ml:pending on n4 x 8")
}

func TestExternalHoldRetriedWhileServeRefusesAndAnEarlierHoldKept(t *testing.T) {
	// serve already holds c's GPUs (held before a restart): 409, nothing new; d is refused
	// twice (its node full in serve's view) and held on the third try.
	f := start(t, map[string]int{"k8s-external:ml:c": 4}, 0)
	f.serve.mu.Lock()
	f.serve.refuseHolds = 2
	f.serve.mu.Unlock()
	for _, p := range []*corev1.Pod{externalPod("c", "n1", 4), externalPod("d", "n2", 1)} {
		if _, err := f.client.CoreV1().Pods("ml").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.expectHeld("k8s-external:ml:d on n2 x 1")
	f.deletePod("c")
	f.expectReleased("k8s-external:ml:c")
}

func TestPodGPUsCountsInitContainersAsKubeSchedulerDoes(t *testing.T) {
	p := externalPod("x", "n1", 2)
	p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0])
	if got := podGPUs(p, DefaultGPUResource); got != 4 {
		t.Fatalf("two containers of 2: %d GPUs, want 4", got)
	}
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{DefaultGPUResource: *resource.NewQuantity(8, resource.DecimalSI)}}}}
	if got := podGPUs(p, DefaultGPUResource); got != 8 {
		t.Fatalf("an init container of 8: %d GPUs, want 8", got)
	}
}
