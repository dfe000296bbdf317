package inspect

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Options are `kaas inspect`'s flags.
type Options struct {
	Admin string // admin listener host:port
	JSON  bool   // print one snapshot and exit
	// Connections prints the open client connections (listener, remote,
	// principal, SASL mechanism, TLS) as JSON and exits.
	Connections bool
	Actor       string // one actor (JSON: its detail; TUI: open on it)
	Filter      string // substring of kind/name
	Refresh     time.Duration
	In          io.Reader
	Out         io.Writer
}

// Run prints a JSON snapshot or runs the live view until q.
func Run(ctx context.Context, o Options) error {
	c := NewClient(o.Admin)
	if o.Connections {
		body, err := c.Raw(ctx, "/api/connections")
		if err != nil {
			return err
		}
		_, err = o.Out.Write(body)
		return err
	}
	if o.JSON {
		path := "/api/actors"
		if o.Actor != "" {
			path += "/" + o.Actor
		} else if o.Filter != "" {
			path += "?filter=" + url.QueryEscape(o.Filter)
		}
		body, err := c.Raw(ctx, path)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(body)
		return err
	}
	m := NewModel(c, o.Admin, o.Filter, o.Actor, o.Refresh)
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithInput(o.In), tea.WithOutput(o.Out))
	if _, err := p.Run(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("inspect: %w", err)
	}
	return nil
}
