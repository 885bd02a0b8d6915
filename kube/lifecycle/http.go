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
	// TokenFile holds the bearer token of serve's --token-file; read on every POST and DELETE so a
	// rotated secret is picked up. Empty: no token.
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

// Jobs reads GET /v1/jobs and returns each job's id.
func (t *HTTPToposched) Jobs(ctx context.Context) ([]string, error) {
	var list struct {
		Jobs []struct {
			Job string `json:"job"`
		} `json:"jobs"`
	}
	address := t.BaseURL + "/v1/jobs"
	status, err := t.getJSON(ctx, address, &list)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNotFound {
		return nil, fmt.Errorf("GET %s: HTTP 404 (is this toposched serve?)", address)
	}
	ids := make([]string, 0, len(list.Jobs))
	for _, j := range list.Jobs {
		ids = append(ids, j.Job)
	}
	return ids, nil
}

// Hold sends POST /v1/jobs for `gpus` GPUs within node, first-fit; 409 (a job of that id
// exists: held before a restart of this controller) is success.
func (t *HTTPToposched) Hold(ctx context.Context, job, node string, gpus int) error {
	body, err := json.Marshal(map[string]any{"job": job, "gpus": gpus, "within_nodes": node, "policy": "first-fit"})
	if err != nil {
		return err
	}
	address := t.BaseURL + "/v1/jobs"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, address, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return t.send(req, http.StatusConflict)
}

// send adds the bearer token, sends req and accepts 200, 201 and `alsoFine`.
func (t *HTTPToposched) send(req *http.Request, alsoFine int) error {
	if t.TokenFile != "" {
		token, err := os.ReadFile(t.TokenFile)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, alsoFine:
		return nil
	}
	return fmt.Errorf("%s %s: HTTP %d: %s", req.Method, req.URL, resp.StatusCode, answer)
}

// Release sends DELETE /v1/jobs/ID; 404 (already released) is success.
func (t *HTTPToposched) Release(ctx context.Context, job string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.jobURL(job), nil)
	if err != nil {
		return err
	}
	return t.send(req, http.StatusNotFound)
}
