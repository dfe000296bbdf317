// Package inspect is `kaas inspect`: a live terminal view of a running
// broker's actors, read from its admin listener (/api/actors), and a
// --json mode that prints one snapshot for scripts.
package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"kaas/broker/admin"
)

// Client reads a broker's admin listener.
type Client struct {
	base string
	http *http.Client
}

// NewClient talks to the admin listener at addr (host:port or a URL).
func NewClient(addr string) *Client {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{base: strings.TrimRight(base, "/"), http: &http.Client{Timeout: 5 * time.Second}}
}

// Snapshot fetches every actor whose name contains match.
func (c *Client) Snapshot(ctx context.Context, match string) (admin.Snapshot, error) {
	var s admin.Snapshot
	q := ""
	if match != "" {
		q = "?filter=" + url.QueryEscape(match)
	}
	raw, err := c.get(ctx, "/api/actors"+q)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("decoding the actor snapshot: %w", err)
	}
	return s, nil
}

// Detail fetches one actor: its row and its state, as generic JSON so
// actor kinds added later render without changes here.
func (c *Client) Detail(ctx context.Context, name string) (map[string]any, error) {
	raw, err := c.get(ctx, "/api/actors/"+name)
	if err != nil {
		return nil, err
	}
	var d map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("decoding actor %s: %w", name, err)
	}
	return d, nil
}

// Raw returns an endpoint's body as is (the --json mode).
func (c *Client) Raw(ctx context.Context, path string) ([]byte, error) { return c.get(ctx, path) }

func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin listener %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("%s: %s", path, e.Error)
		}
		return nil, fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	return body, nil
}
