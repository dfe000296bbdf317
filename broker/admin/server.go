// Package admin is the broker's admin HTTP listener: Prometheus metrics at
// /metrics, and the actor inspector — a web page at / (assets embedded in
// the binary, views streamed by Server-Sent Events) over a JSON API under
// /api/ that `kaas inspect` reads too, including the client connections
// with their principals at /api/connections.
//
// Inspecting never stalls the broker: rows come from mailbox counters
// (atomics) sampled once a second, summaries from state the actors
// publish, and state functions that ask an actor do so with a short
// timeout on the inspector's goroutine — an actor never waits for the
// inspector.
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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kaas/actors/system"
	"kaas/metrics/events"
)

// Config is what the admin listener serves.
type Config struct {
	Addr     string // host:port; port 0 picks one
	Gatherer prometheus.Gatherer
	Actors   *system.System
	// Summaries digests actors of a kind from published state; kinds
	// without one are digested from their state function (see Digest).
	Summaries map[string]SummaryFunc
	// Requests gathers the request collectors (per-API rates and
	// latencies, sampled every second).
	Requests prometheus.Gatherer
	// Source is the broker beyond its actors.
	Source Source
	// Events is the journal behind the KIP-360 timeline.
	Events *events.Journal
	// TxnMaxTimeout is transaction.max.timeout.ms: a transaction open
	// longer may be hanging.
	TxnMaxTimeout time.Duration
	// Connections lists the open client connections (/api/connections,
	// and the overview).
	Connections func() []Connection
	// Panels are extra overview tables (see Panel).
	Panels []func() Panel
	// Ready answers /readyz (200 when true; Kubernetes' readiness probe).
	Ready func() bool
	// Cluster answers /api/cluster (ownership, lease, members); nil, or a
	// nil answer, in single-broker mode.
	Cluster func() any
	Logger  *slog.Logger
}

// Server is a running admin listener.
type Server struct {
	cfg      Config
	http     *http.Server
	ln       net.Listener
	done     chan struct{} // the HTTP server has stopped
	closing  chan struct{} // Close has begun: streams end, samplers stop
	workers  sync.WaitGroup
	sampler  *sampler
	requests *requestSampler
	disk     *diskMeter
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
	s := &Server{cfg: cfg, ln: ln, done: make(chan struct{}), closing: make(chan struct{}),
		requests: newRequestSampler(cfg.Requests)}
	s.sampler = newSampler(cfg.Actors, s.requests)
	dataDir := ""
	if cfg.Source != nil {
		dataDir = cfg.Source.Identity().DataDir
	}
	s.disk = &diskMeter{dir: dataDir}
	s.workers.Add(2)
	go func() { defer s.workers.Done(); s.sampler.run(s.closing) }()
	go func() { defer s.workers.Done(); s.disk.run(s.closing) }()
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
	close(s.closing)
	s.workers.Wait()
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
	mux.HandleFunc("GET /api/identity", s.serveIdentity)
	mux.HandleFunc("GET /api/overview", s.serveView("overview"))
	mux.HandleFunc("GET /api/kip360", s.serveView("kip360"))
	mux.HandleFunc("GET /api/transactions", s.serveView("transactions"))
	mux.HandleFunc("GET /api/stream", s.serveStream)
	// The page: one document for every view's URL (the script reads the
	// path), and its assets.
	for _, p := range pageRoutes {
		mux.HandleFunc("GET "+p, s.servePage)
	}
	mux.Handle("GET /assets/", assetHandler())
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.HandleFunc("GET /api/cluster", s.serveCluster)
	// Go's profiler, for operators chasing a hot spot in a live broker (the
	// listener is loopback by default).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Ready != nil && !s.cfg.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]bool{"ready": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ready": true})
}

func (s *Server) serveCluster(w http.ResponseWriter, _ *http.Request) {
	var st any
	if s.cfg.Cluster != nil {
		st = s.cfg.Cluster()
	}
	if st == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not a cluster member (single-broker mode)"})
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func filterFrom(r *http.Request) Filter {
	q := r.URL.Query()
	match := q.Get("filter")
	if match == "" {
		match = q.Get("q")
	}
	return Filter{Kind: q.Get("kind"), Match: match}
}

func (s *Server) serveActors(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.snapshot(filterFrom(r)))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
