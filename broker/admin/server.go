// Package admin is the broker's admin HTTP listener: Prometheus metrics at
// /metrics, the actor inspector as JSON at /api/actors and
// /api/actors/{name}, the client connections with their principals at
// /api/connections, and the same as a small HTML page at /.
//
// Inspecting never stalls the broker: rows come from mailbox counters
// (atomics), summaries from state the actors publish, and state functions
// that ask an actor do so with a short timeout on the inspector's
// goroutine — an actor never waits for the inspector.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kaas/actors/system"
)

// Config is what the admin listener serves.
type Config struct {
	Addr     string // host:port; port 0 picks one
	Gatherer prometheus.Gatherer
	Actors   *system.System
	// Summaries digests actors of a kind from published state; kinds
	// without one are digested from their state function (see Digest).
	Summaries map[string]SummaryFunc
	// Connections lists the open client connections (/api/connections).
	Connections func() []Connection
	Logger      *slog.Logger
}

// Server is a running admin listener.
type Server struct {
	cfg   Config
	http  *http.Server
	ln    net.Listener
	done  chan struct{}
	rates rateTracker
}

// Listen binds cfg.Addr and serves until Close.
func Listen(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener on %s: %w", cfg.Addr, err)
	}
	s := &Server{cfg: cfg, ln: ln, done: make(chan struct{})}
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("admin listener stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the listener, letting requests in flight finish until ctx
// ends.
func (s *Server) Close(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.http.Close())
	}
	<-s.done
	return err
}

// Handler routes the admin endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("GET /api/actors", s.serveActors)
	mux.HandleFunc("GET /api/actors/{name...}", s.serveActor)
	mux.HandleFunc("GET /api/connections", s.serveConnections)
	mux.HandleFunc("GET /{$}", s.servePage)
	// Go's profiler, for operators chasing a hot spot in a live broker (the
	// listener is loopback by default).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

func filterFrom(r *http.Request) Filter {
	return Filter{Kind: r.URL.Query().Get("kind"), Match: r.URL.Query().Get("filter")}
}

func (s *Server) serveActors(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.snapshot(filterFrom(r)))
}

// detailBudget bounds one actor's state function in the detail view (the
// partition's own ask gives up after 250 ms).
const detailBudget = time.Second

func (s *Server) serveActor(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	info, ok := s.cfg.Actors.Lookup(name)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no actor named " + name})
		return
	}
	d := Detail{Actor: s.row(info, time.Now())}
	if fn := s.cfg.Summaries[info.Kind]; fn != nil {
		d.Summary = fn(info)
	}
	if info.State != nil {
		got := make(chan any, 1)
		go func() { got <- info.State(info.PID) }()
		select {
		case d.State = <-got:
		case <-time.After(detailBudget):
			d.State = map[string]string{"status": "busy: no state within " + detailBudget.String()}
		}
		if d.Summary == nil {
			d.Summary = Digest(d.State)
		}
	}
	writeJSON(w, http.StatusOK, d)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
