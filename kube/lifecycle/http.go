package lifecycle

import (
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
	// TokenFile holds the bearer token of serve's --token-file; read on every DELETE so a
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

// JobGPUs reads GET /v1/jobs/ID.
func (t *HTTPToposched) JobGPUs(ctx context.Context, job string) (int, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.jobURL(job), nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, false, err
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return 0, false, nil
	case http.StatusOK:
	default:
		return 0, false, fmt.Errorf("GET %s: HTTP %d: %s", t.jobURL(job), resp.StatusCode, body)
	}
	var placed struct {
		GPUs []json.RawMessage `json:"gpus"`
	}
	if err := json.Unmarshal(body, &placed); err != nil {
		return 0, false, fmt.Errorf("GET %s: %w", t.jobURL(job), err)
	}
	return len(placed.GPUs), true, nil
}

// Jobs reads GET /v1/jobs and returns each job's id.
func (t *HTTPToposched) Jobs(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.BaseURL+"/v1/jobs", nil)
	if err != nil {
		return nil, err
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/v1/jobs: HTTP %d: %s", t.BaseURL, resp.StatusCode, body)
	}
	var list struct {
		Jobs []struct {
			Job string `json:"job"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET %s/v1/jobs: %w", t.BaseURL, err)
	}
	ids := make([]string, 0, len(list.Jobs))
	for _, j := range list.Jobs {
		ids = append(ids, j.Job)
	}
	return ids, nil
}

// Release sends DELETE /v1/jobs/ID; 404 (already released) is success.
func (t *HTTPToposched) Release(ctx context.Context, job string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.jobURL(job), nil)
	if err != nil {
		return err
	}
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
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("DELETE %s: HTTP %d: %s", t.jobURL(job), resp.StatusCode, body)
	}
	return nil
}
