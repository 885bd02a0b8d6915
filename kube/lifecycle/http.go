package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// HTTPToposched talks to `toposched serve`'s HTTP API (docs/service.md). Safe for
// concurrent use.
type HTTPToposched struct {
	// BaseURL is serve's address, e.g. http://toposched.toposched.svc:7070.
	BaseURL string
	// TokenFile holds the bearer token of serve's --token-file; read on every write (POST,
	// DELETE, PUT) so a rotated secret is picked up. Empty: no token.
	TokenFile string
	Client    *http.Client
}

// NewHTTPToposched returns a client with a 10-second timeout per request.
func NewHTTPToposched(baseURL, tokenFile string) *HTTPToposched {
	return &HTTPToposched{BaseURL: strings.TrimRight(baseURL, "/"), TokenFile: tokenFile,
		Client: &http.Client{Timeout: 10 * time.Second}}
}

func (t *HTTPToposched) jobURL(job string) string {
	return t.BaseURL + "/v1/jobs/" + url.PathEscape(job)
}

// getJSON sends GET address and decodes a 200 answer's body into `into`; it returns the status.
// A status other than 200 and 404 is an error.
func (t *HTTPToposched) getJSON(ctx context.Context, address string, into any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return 0, err
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return 0, err
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return resp.StatusCode, nil
	case http.StatusOK:
	default:
		return resp.StatusCode, fmt.Errorf("GET %s: HTTP %d: %s", address, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: %w", address, err)
	}
	return resp.StatusCode, nil
}

// JobGPUs reads GET /v1/jobs/ID.
func (t *HTTPToposched) JobGPUs(ctx context.Context, job string) (int, bool, error) {
	var placed struct {
		GPUs []json.RawMessage `json:"gpus"`
	}
	status, err := t.getJSON(ctx, t.jobURL(job), &placed)
	if err != nil || status == http.StatusNotFound {
		return 0, false, err
	}
	return len(placed.GPUs), true, nil
}

// names reads GET path, {"LIST":[{"FIELD":"name",...},...]}, and returns each item's FIELD.
func (t *HTTPToposched) names(ctx context.Context, path, list, field string) ([]string, error) {
	var answer map[string][]map[string]json.RawMessage
	address := t.BaseURL + path
	status, err := t.getJSON(ctx, address, &answer)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNotFound {
		return nil, fmt.Errorf("GET %s: HTTP 404 (is this a toposched serve that has it?)", address)
	}
	names := make([]string, 0, len(answer[list]))
	for _, item := range answer[list] {
		var name string
		if err := json.Unmarshal(item[field], &name); err != nil {
			return nil, fmt.Errorf("GET %s: an item's %q: %w", address, field, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// Jobs reads GET /v1/jobs and returns each job's id.
func (t *HTTPToposched) Jobs(ctx context.Context) ([]string, error) {
	return t.names(ctx, "/v1/jobs", "jobs", "job")
}

// write sends a POST, DELETE or PUT with the bearer token and returns the status; a status
// other than 200, 201 and 404 is an error naming the request and serve's answer.
func (t *HTTPToposched) write(ctx context.Context, method, address string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, address, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if t.TokenFile != "" {
		token, err := os.ReadFile(t.TokenFile)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusNotFound:
	default:
		return resp.StatusCode, fmt.Errorf("%s %s: HTTP %d: %s", method, address, resp.StatusCode, answer)
	}
	return resp.StatusCode, nil
}

// Hold sends POST /v1/jobs for `gpus` GPUs within node, first-fit; 409 (a job of that id
// exists: held before a restart of this controller) is success.
func (t *HTTPToposched) Hold(ctx context.Context, job, node string, gpus int) error {
	body, err := json.Marshal(map[string]any{"job": job, "gpus": gpus, "within_nodes": node, "policy": "first-fit"})
	if err != nil {
		return err
	}
	status, err := t.write(ctx, http.MethodPost, t.BaseURL+"/v1/jobs", body)
	switch status {
	case http.StatusConflict:
		return nil
	case http.StatusNotFound:
		return fmt.Errorf("POST %s/v1/jobs: HTTP 404 (is this toposched serve?)", t.BaseURL)
	}
	return err
}

// Release sends DELETE /v1/jobs/ID; 404 (already released) is success.
func (t *HTTPToposched) Release(ctx context.Context, job string) error {
	_, err := t.write(ctx, http.MethodDelete, t.jobURL(job), nil)
	return err
}

// NodeSource is the source the controller's node marks carry in serve.
const NodeSource = "k8s"

// SetNodeAvailability sends PUT /v1/nodes/NAME/availability as source "k8s"; 404 means serve
// has no such node (found false).
func (t *HTTPToposched) SetNodeAvailability(ctx context.Context, node string, available bool, reason string) (bool, error) {
	change := map[string]any{"available": available, "source": NodeSource}
	if !available {
		change["reason"] = reason
	}
	body, err := json.Marshal(change)
	if err != nil {
		return false, err
	}
	status, err := t.write(ctx, http.MethodPut, t.BaseURL+"/v1/nodes/"+url.PathEscape(node)+"/availability", body)
	return status == http.StatusOK, err
}

// Nodes reads GET /v1/nodes and returns each node's name.
func (t *HTTPToposched) Nodes(ctx context.Context) ([]string, error) {
	return t.names(ctx, "/v1/nodes", "nodes", "node")
}
