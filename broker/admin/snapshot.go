package admin

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"kaas/actors/system"
)

// Snapshot is the answer of /api/actors and what `kaas inspect --json`
// prints: every live actor, sorted by name.
type Snapshot struct {
	Time   time.Time `json:"time"`
	Actors []Actor   `json:"actors"`
}

// Actor is one actor's row.
type Actor struct {
	Kind         string `json:"kind"`
	Name         string `json:"name"`
	MailboxDepth int64  `json:"mailbox_depth"`
	Processed    int64  `json:"messages_processed"`
	// MessagesPerSec is measured over the last second (the sampler's
	// interval); an actor younger than that shows its average since it
	// started.
	MessagesPerSec float64 `json:"messages_per_sec"`
	// LastMessageAgeSec is how long ago the actor last took a message, -1
	// if it never has.
	LastMessageAgeSec float64 `json:"last_message_age_sec"`
	UptimeSec         float64 `json:"uptime_sec"`
	// Summary is a flat digest of the actor's state: scalars as they are,
	// lists as their length. Full state is in the detail (State).
	Summary map[string]any `json:"summary,omitempty"`
}

// SummaryFunc digests an actor from state it publishes (no asking): cheap
// enough to run for every actor of its kind on every refresh.
type SummaryFunc func(info *system.Info) map[string]any

// stateBudget bounds how long one snapshot waits for state functions of
// actors whose kind has no SummaryFunc; an actor that has not answered by
// then is shown as busy.
const stateBudget = 300 * time.Millisecond

// maxStateCalls bounds concurrent state calls of one snapshot.
const maxStateCalls = 32

// Filter selects actors: Kind exact (empty: all), Match a substring of the
// full name in any case (empty: all).
type Filter struct {
	Kind  string
	Match string
}

func (f Filter) keep(i *system.Info) bool {
	return (f.Kind == "" || i.Kind == f.Kind) && matches(strings.ToLower(f.Match), i.Name)
}

// snapshot builds a Snapshot of the actors f selects.
func (s *Server) snapshot(f Filter) Snapshot {
	now := time.Now()
	infos := s.cfg.Actors.Actors()
	out := Snapshot{Time: now, Actors: make([]Actor, 0, len(infos))}
	var ask []int // rows whose summary needs the actor's state function
	for _, i := range infos {
		if !f.keep(i) {
			continue
		}
		row := s.row(i, now)
		if fn := s.cfg.Summaries[i.Kind]; fn != nil {
			row.Summary = fn(i)
		} else if i.State != nil {
			ask = append(ask, len(out.Actors))
		}
		out.Actors = append(out.Actors, row)
	}
	if len(ask) > 0 {
		states := callStates(out.Actors, ask, s.cfg.Actors)
		for k, idx := range ask {
			out.Actors[idx].Summary = states[k]
		}
	}
	return out
}

// row reads one actor's mailbox counters.
func (s *Server) row(i *system.Info, now time.Time) Actor {
	processed := i.Mailbox.Processed()
	a := Actor{
		Kind: i.Kind, Name: i.Name,
		MailboxDepth: i.Mailbox.Depth(), Processed: processed,
		LastMessageAgeSec: -1, UptimeSec: now.Sub(i.Started).Seconds(),
	}
	if t := i.Mailbox.LastMessage(); !t.IsZero() {
		a.LastMessageAgeSec = now.Sub(t).Seconds()
	}
	a.MessagesPerSec = round3(s.sampler.rateOf(i.Name))
	return a
}

// callStates runs the state functions of the rows in ask concurrently and
// digests what they return within stateBudget.
func callStates(rows []Actor, ask []int, sys *system.System) []map[string]any {
	type result struct {
		k int
		v map[string]any
	}
	results := make(chan result, len(ask))
	sem := make(chan struct{}, maxStateCalls)
	done := make(chan struct{}) // closed at the deadline: calls not started are dropped
	defer close(done)
	wait, cancel := system.Within(stateBudget)
	defer cancel()
	for k, idx := range ask {
		name := rows[idx].Name
		go func() {
			select {
			case sem <- struct{}{}:
			case <-done:
				return
			}
			defer func() { <-sem }()
			info, ok := sys.Lookup(name)
			if !ok || info.State == nil {
				results <- result{k, map[string]any{"status": "stopped"}}
				return
			}
			results <- result{k, Digest(info.State(info.PID))}
		}()
	}
	out := make([]map[string]any, len(ask))
	for n := 0; n < len(ask); n++ {
		r, err := system.Await(wait, results)
		if err != nil {
			for k := range out {
				if out[k] == nil {
					out[k] = system.Busy("state", stateBudget)
				}
			}
			return out
		}
		out[r.k] = r.v
	}
	return out
}

// Digest flattens any state value into a one-level summary: top-level
// scalars as they are, lists and objects as their size. A state that is
// not an object becomes {"value": ...}.
func Digest(state any) map[string]any {
	raw, err := json.Marshal(state)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // offsets stay integers, not 1e+06
	if err := dec.Decode(&v); err != nil {
		return map[string]any{"error": err.Error()}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return map[string]any{"value": v}
	}
	out := make(map[string]any, len(obj))
	for k, x := range obj {
		switch x := x.(type) {
		case []any:
			out[k] = len(x)
		case map[string]any:
			out[k] = len(x)
		default:
			out[k] = x
		}
	}
	return out
}

// sortActors orders rows by kind, then name.
func sortActors(rows []Actor) {
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Kind != rows[j].Kind {
			return rows[i].Kind < rows[j].Kind
		}
		return rows[i].Name < rows[j].Name
	})
}
