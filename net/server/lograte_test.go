package server

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"kaas/metrics"
)

// TestLogEvery: the first occurrence is logged; later ones within the
// interval are held back and counted; the first one after it is logged
// with that count, and the count starts over.
func TestLogEvery(t *testing.T) {
	l := logEvery{interval: 10 * time.Second}
	t0 := time.Unix(1_000_000, 0)
	steps := []struct {
		at   time.Duration
		ok   bool
		held int
	}{
		{0, true, 0},
		{5 * time.Millisecond, false, 0},
		{time.Second, false, 0},
		{9 * time.Second, false, 0},
		{10 * time.Second, true, 3},
		{11 * time.Second, false, 0},
		{time.Minute, true, 1},
		{2 * time.Minute, true, 0},
	}
	for _, s := range steps {
		ok, held := l.allow(t0.Add(s.at))
		if ok != s.ok || held != s.held {
			t.Fatalf("at +%v: allow = %v, %d; want %v, %d", s.at, ok, held, s.ok, s.held)
		}
	}
}

// TestAcceptFailuresLoggedOncePerInterval: a burst of failed accepts on
// a running server (EMFILE, as out of descriptors) is counted one by one
// in kaas_accept_errors_total{errno="EMFILE"} but logged once.
func TestAcceptFailuresLoggedOncePerInterval(t *testing.T) {
	var log syncBuffer
	m := metrics.New()
	s := startServer(t, newFakeHandler(true), func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
		c.Metrics = m
	})
	al := s.acc.loops[0]
	for range 100 {
		s.acceptFailed(al, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, time.Second)
	}
	if n := strings.Count(log.String(), "accepting a connection failed"); n != 1 {
		t.Fatalf("%d lines for 100 failures within %v, want 1:\n%s", n, acceptLogInterval, log.String())
	}
	if got := testutil.ToFloat64(m.AcceptErrors.WithLabelValues("EMFILE")); got != 100 {
		t.Fatalf("kaas_accept_errors_total{errno=EMFILE} = %v, want 100", got)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines to log
// into while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
