package etcdembed

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A real single-node server serves a client put/get, and closing it logs
// no error-level line (the expected "closed" noise is filtered).
func TestServeAndCloseQuietly(t *testing.T) {
	var out syncBuf
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := Start(Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zapLogger(log)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	got, err := cl.Get(ctx, "k")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" {
		t.Fatalf("get: %v %v", got, err)
	}
	cl.Close()
	s.Close()
	if strings.Contains(out.String(), "level=ERROR") {
		t.Fatalf("error-level lines on a clean close:\n%s", out.String())
	}
}

func TestBadListen(t *testing.T) {
	if _, err := Start(Config{Listen: "nonsense", DataDir: t.TempDir()}); err == nil {
		t.Fatal("want an error for a listen address without a port")
	}
}
