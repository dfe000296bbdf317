// Package etcdembed runs a single-node etcd inside the process: `kaas
// etcd` for development and `make cluster`, and the real etcd every
// cluster test talks to. Production runs a real etcd cluster
// (deploy/kubernetes/etcd.yaml); brokers only ever use the client.
package etcdembed

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Config is what a single-node server needs.
type Config struct {
	// Listen is the client host:port (port 0 picks a free one).
	Listen string
	// PeerListen is the raft peer host:port; empty picks a free loopback
	// port (a single node never dials it, but etcd must bind one).
	PeerListen string
	DataDir    string
	Logger     *slog.Logger
	// ReadyTimeout bounds start-up (default 30 s).
	ReadyTimeout time.Duration
}

// Server is a running single-node etcd.
type Server struct {
	e         *embed.Etcd
	endpoint  string
	closeOnce sync.Once // etcd's Close panics the second time
}

// Start starts the server and returns once it serves clients.
func Start(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.PeerListen == "" {
		cfg.PeerListen = "127.0.0.1:0"
	}
	client, err := httpURL(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("etcd --listen: %w", err)
	}
	peer, err := httpURL(cfg.PeerListen)
	if err != nil {
		return nil, fmt.Errorf("etcd peer listener: %w", err)
	}
	// etcd wants its data directory private.
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	_ = os.Chmod(cfg.DataDir, 0o700)
	ec := embed.NewConfig()
	ec.Name = "kaas-etcd"
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{client}
	ec.AdvertiseClientUrls = []url.URL{client}
	ec.ListenPeerUrls = []url.URL{peer}
	ec.AdvertisePeerUrls = []url.URL{peer}
	ec.InitialCluster = ec.Name + "=" + peer.String()
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zapLogger(cfg.Logger))
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd in %s: %w", cfg.DataDir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(cfg.ReadyTimeout):
		e.Server.Stop()
		e.Close()
		return nil, errors.New("embedded etcd was not ready in time")
	}
	return &Server{e: e, endpoint: "http://" + e.Clients[0].Addr().String()}, nil
}

// Endpoint is the client URL, e.g. http://127.0.0.1:2379.
func (s *Server) Endpoint() string { return s.endpoint }

// Err reports a fatal serving error.
func (s *Server) Err() <-chan error { return s.e.Err() }

// Close stops the server and waits for it.
func (s *Server) Close() { s.closeOnce.Do(s.e.Close) }

func httpURL(hostport string) (url.URL, error) {
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return url.URL{}, err
	}
	return url.URL{Scheme: "http", Host: hostport}, nil
}
