package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// serveStream is /api/stream: Server-Sent Events, one `view` event a
// second (as each sample is taken) carrying the whole view the page is
// on — ?view=overview|kip360|transactions|actor, &name= for an actor,
// &q= the name filter. The page never reloads; a dropped connection is
// reopened by the browser's EventSource.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	query := r.URL.Query()
	view, name, q := query.Get("view"), query.Get("name"), strings.ToLower(query.Get("q"))
	build := s.viewBuilder(view, name, q)
	if build == nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unknown view " + view})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	// Ask the browser to retry after a second if the broker restarts.
	fmt.Fprint(w, "retry: 1000\n\n")
	for {
		next := s.sampler.next()
		v, status := build(r)
		raw, err := json.Marshal(v)
		if err != nil {
			s.cfg.Logger.Warn("encoding an inspector view", "view", view, "err", err)
			return
		}
		event := "view"
		if status != http.StatusOK {
			event = "missing"
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, raw); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
}

// viewBuilder returns the function building one view's document and its
// HTTP status, or nil for an unknown view.
func (s *Server) viewBuilder(view, name, q string) func(*http.Request) (any, int) {
	switch view {
	case "overview", "":
		return func(*http.Request) (any, int) { return s.overview(q), http.StatusOK }
	case "kip360":
		return func(r *http.Request) (any, int) { return s.kip360(r.Context(), q), http.StatusOK }
	case "transactions":
		return func(r *http.Request) (any, int) { return s.transactions(r.Context(), q), http.StatusOK }
	case "actor":
		return func(r *http.Request) (any, int) {
			d, ok := s.detail(r.Context(), name)
			if !ok {
				return map[string]string{"error": "no actor named " + name}, http.StatusNotFound
			}
			return d, http.StatusOK
		}
	}
	return nil
}

// serveView is /api/{overview,kip360,transactions}: one view, once.
func (s *Server) serveView(view string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, status := s.viewBuilder(view, "", strings.ToLower(r.URL.Query().Get("q")))(r)
		writeJSON(w, status, v)
	}
}

// serveIdentity is /api/identity: who the broker is and how long it has
// been up (the page's header on every view).
func (s *Server) serveIdentity(w http.ResponseWriter, r *http.Request) {
	id := s.identity()
	writeJSON(w, http.StatusOK, map[string]any{"broker": id, "uptime_sec": round3(time.Since(id.Started).Seconds())})
}
