package admin

import (
	"context"
	"net/http"
	"strings"
	"time"

	"kaas/actors/system"
	"kaas/metrics/events"
)

// Detail is the answer of /api/actors/{name}: one actor's row, its state,
// its mailbox over the last five minutes, the actors related to it and
// the journal's events that concern it.
type Detail struct {
	Actor
	// Running is false for an actor that is not live but whose state the
	// broker keeps (a passivated transactional id).
	Running bool `json:"running"`
	// State is whatever the actor's state function returned (its
	// published state, or its answer to a short-timeout ask).
	State     any            `json:"state"`
	History   Series         `json:"history"`
	Relations Relations      `json:"relations"`
	Events    []events.Event `json:"events"`
}

// detailBudget bounds one actor's state function in the detail view (the
// partition's own ask gives up after 250 ms).
const detailBudget = time.Second

// maxActorEvents bounds the events one detail carries.
const maxActorEvents = 100

func (s *Server) detail(ctx context.Context, name string) (Detail, bool) {
	info, ok := s.cfg.Actors.Lookup(name)
	if !ok {
		state, dormant := s.dormant(name)
		if !dormant {
			return Detail{}, false
		}
		kind, _, _ := strings.Cut(name, "/")
		d := Detail{Actor: Actor{Kind: kind, Name: name, LastMessageAgeSec: -1, Summary: Digest(state)}, State: state,
			History: s.sampler.actor(name), Events: []events.Event{}}
		d.Relations = s.relations(ctx, kind, name, state)
		d.Events = s.actorEvents(kind, name, d.Relations)
		return d, true
	}
	d := Detail{Actor: s.row(info, time.Now()), Running: true, History: s.sampler.actor(name)}
	if fn := s.cfg.Summaries[info.Kind]; fn != nil {
		d.Summary = fn(info)
	}
	if info.State != nil {
		got := make(chan any, 1)
		go func() { got <- info.State(info.PID) }()
		wait, cancel := system.Within(detailBudget)
		var err error
		if d.State, err = system.Await(wait, got); err != nil {
			d.State = system.Busy("state", detailBudget)
		}
		cancel()
		if d.Summary == nil {
			d.Summary = Digest(d.State)
		}
	}
	d.Relations = s.relations(ctx, info.Kind, name, d.State)
	d.Events = s.actorEvents(info.Kind, name, d.Relations)
	return d, true
}

func (s *Server) dormant(name string) (any, bool) {
	if s.cfg.Source == nil {
		return nil, false
	}
	return s.cfg.Source.Dormant(name)
}

func (s *Server) relations(ctx context.Context, kind, name string, state any) Relations {
	r := Relations{Links: []Link{}}
	if s.cfg.Source != nil {
		r = s.cfg.Source.Relations(ctx, kind, name, state)
		if r.Links == nil {
			r.Links = []Link{}
		}
	}
	return r
}

// actorEvents are the journal's events about an actor: a partition's
// zombies, a transactional id's bumps (and the fences and zombies of its
// producer ids), every fence for the fence broadcaster. Newest first.
func (s *Server) actorEvents(kind, name string, rel Relations) []events.Event {
	out := []events.Event{}
	_, short, _ := strings.Cut(name, "/")
	var keep func(e events.Event) bool
	switch kind {
	case "partition":
		keep = func(e events.Event) bool { return e.Where == short }
	case "fence":
		keep = func(e events.Event) bool { return e.Kind == events.Fence }
	case "txn":
		pids := map[int64]bool{}
		for _, t := range s.cfg.Source.Transactions() {
			if t.TransactionalID == short {
				pids[t.ProducerID] = true
			}
		}
		keep = func(e events.Event) bool { return e.TransactionalID == short || pids[e.ProducerID] }
	default:
		return out
	}
	all := s.cfg.Events.Events()
	for i := len(all) - 1; i >= 0 && len(out) < maxActorEvents; i-- {
		if keep(all[i]) {
			out = append(out, all[i])
		}
	}
	return out
}

func (s *Server) serveActor(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d, ok := s.detail(r.Context(), name)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no actor named " + name})
		return
	}
	writeJSON(w, http.StatusOK, d)
}
