package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// client calls the verbs `toposched serve --k8s-extender` installs under its URL prefix
// (docs/kubernetes.md): bind, which the extender uses too, and plan (filter + member),
// member, unreserve and dry-run, which only this plugin uses. One keep-alive connection pool; every call has
// the configured time-out. Safe for concurrent use.
type client struct {
	base string // e.g. http://127.0.0.1:7071/toposched
	http *http.Client
}

func newClient(base string, timeout time.Duration) *client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 16 // the binding goroutines call bind in parallel
	return &client{base: strings.TrimRight(base, "/"),
		http: &http.Client{Timeout: timeout, Transport: transport}}
}

// member is serve's answer to the member verb: the pod's group as planned.
type member struct {
	Job   string `json:"job"`
	Size  int    `json:"size"`
	Bound int    `json:"bound"`
	Slot  int    `json:"slot"`
	Node  string `json:"node"`
	GPUs  []int  `json:"gpus"` // the slot's GPUs on Node (local indices, rank order)
}

// plannedOn: nil when serve planned the pod on `node`.
func (m *member) plannedOn(node string) error {
	if m.Node != node {
		return fmt.Errorf("toposched planned the pod on %s, not %s", m.Node, node)
	}
	return nil
}

// errNoSlot: serve holds nothing for the pod (its reservation expired, or was released).
var errNoSlot = fmt.Errorf("toposched holds no reservation for the pod")

// post sends `in` as JSON to verb and decodes a 200 answer into `out`; it returns the status.
func (c *client) post(ctx context.Context, verb string, in, out any) (int, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/"+verb, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("toposched %s: %w", verb, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("toposched %s: %w", verb, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("toposched %s: HTTP %d: %s", verb, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return resp.StatusCode, fmt.Errorf("toposched %s: the answer is not %T: %w", verb, out, err)
	}
	return resp.StatusCode, nil
}

func bindingArgs(pod *v1.Pod, node string) extenderv1.ExtenderBindingArgs {
	return extenderv1.ExtenderBindingArgs{PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: pod.UID, Node: node}
}

// planned is serve's answer to the plan verb: the filter verb's answer and the pod's group
// (nil when the pod got no node).
type planned struct {
	Filter extenderv1.ExtenderFilterResult `json:"Filter"`
	Member *member                         `json:"Member"`
}

// plan asks serve to plan the pod's group within `offer` (the filter verb) and answers the
// pod's node and group in one round trip.
func (c *client) plan(ctx context.Context, pod *v1.Pod, offer []string) (*planned, error) {
	var out planned
	_, err := c.post(ctx, "plan", extenderv1.ExtenderArgs{Pod: pod, NodeNames: &offer}, &out)
	return &out, err
}

func (c *client) member(ctx context.Context, pod *v1.Pod, node string) (*member, error) {
	var out member
	status, err := c.post(ctx, "member", bindingArgs(pod, node), &out)
	if status == http.StatusNotFound {
		return nil, errNoSlot
	}
	return &out, err
}

// unreserve gives back what the pod's attempt held; it answers the job released whole
// (empty: only the pod's slot was freed, or nothing was held).
func (c *client) unreserve(ctx context.Context, pod *v1.Pod, node string) (string, error) {
	var out struct {
		Released string `json:"released"`
	}
	_, err := c.post(ctx, "unreserve", bindingArgs(pod, node), &out)
	return out.Released, err
}

// bind has serve post the pod's Binding with the toposched.io/gpus|ranks|rank|job annotations.
func (c *client) bind(ctx context.Context, pod *v1.Pod, node string) error {
	var out extenderv1.ExtenderBindingResult
	if _, err := c.post(ctx, "bind", bindingArgs(pod, node), &out); err != nil {
		return err
	}
	if out.Error != "" {
		return fmt.Errorf("%s", out.Error)
	}
	return nil
}
