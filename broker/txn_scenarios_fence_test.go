package broker

// Scenarios S-30 … S-33 (spec scenarios.md, "Fence ring"): a bump fences
// the producer's old epoch on every local partition, is mirrored to this
// broker's fence file, and peers' fence files are applied by polling and
// at startup.

import (
	"os"
	"reflect"
	"testing"
	"time"
)

// counterValue reads a counter from the broker's metrics registry.
func (s *scenarioBroker) counterValue(name string) float64 {
	s.t.Helper()
	families, err := s.b.metrics.Registry.Gather()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name {
			total := 0.0
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
			return total
		}
	}
	s.t.Fatalf("metric %s not registered", name)
	return 0
}

// S-30 (R-FEN-1, R-FEN-2)
func TestS30_BumpFencesEveryLocalPartition(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	wantIPI(t, "IPI{} → (P,1)", c.ipi(ipiReq(-1, -1)), 0, p, 1)
	c.aptOK(p, 1, a0)
	c.produceOK(pr{tp: a0, pid: p, ep: 1, seq: 0, txn: true}, 0)
	wantCode(t, "END{P,1,commit}", c.end(p, 1, true), 0)

	wantIPI(t, "IPI{} → (P,2)", c.ipi(ipiReq(-1, -1)), 0, p, 2)
	c.produceCode(pr{tp: a0, pid: p, ep: 1, seq: 1}, errInvalidEpoch)
	c.produceCode(pr{tp: a1, pid: p, ep: 1, seq: 0}, errInvalidEpoch) // never touched by P
	c.aptOK(p, 2, a2)
	c.produceCode(pr{tp: a2, pid: p, ep: 2, seq: 1, txn: true}, errOutOfOrder) // the fenced epoch starts at sequence 0
	c.produceOK(pr{tp: a2, pid: p, ep: 2, seq: 0, txn: true}, 0)
}

// S-31 (R-FEN-1, R-FEN-4): every bump, the retry branch included, is in
// this broker's fence file, written atomically.
func TestS31_FenceFileFollowsEveryBump(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	c.initTxn()
	c.initTxn() // S-02: (P,2)
	if got := s.fenceFile(0); !reflect.DeepEqual(got, map[string]int{itoa(p): 2}) {
		t.Fatalf("fence file %v, want {%q: 2}", got, itoa(p))
	}
	wantIPI(t, "IPI{pid:P,ep:2}", c.ipi(ipiReq(p, 2)), 0, p, 3)
	wantIPI(t, "IPI{pid:P,ep:2} again (retry branch)", c.ipi(ipiReq(p, 2)), 0, p, 3)
	if got := s.fenceFile(0); !reflect.DeepEqual(got, map[string]int{itoa(p): 3}) {
		t.Fatalf("fence file %v, want {%q: 3}", got, itoa(p))
	}
	entries, err := os.ReadDir(s.fenceDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "from-0.log" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("fence directory holds %v, want only from-0.log (no temp file)", names)
	}
}

// S-32 (R-FEN-5, R-FEN-7): a peer's fence file is applied by polling; the
// broker's own file is not read back.
func TestS32_PeerFenceFileIsPolled(t *testing.T) {
	s := startScenario(t, func(c *Config) { c.FencePollInterval = 20 * time.Millisecond })
	c := s.conn()
	p := c.initIdempotent()
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 0}, 0)

	writeFenceFile(t, s.fenceDir(), 99, map[int64]int16{p: 5})
	// A batch with a sequence gap is 45 until the fence lands and 47
	// after it (the epoch is checked first), so polling with it appends
	// nothing either way.
	eventually(t, "the peer's fence reaches a-0", func() bool {
		return c.produce(pr{tp: a0, pid: p, ep: 0, seq: 9}).ErrorCode == errInvalidEpoch
	})
	c.produceCode(pr{tp: a0, pid: p, ep: 0, seq: 1}, errInvalidEpoch)
	c.produceOK(pr{tp: a0, pid: p, ep: 5, seq: 0}, 1)
	if got := s.counterValue("kaas_fences_applied_peers_total"); got != 1 {
		t.Fatalf("fences applied from peers: %v, want 1", got)
	}

	writeFenceFile(t, s.fenceDir(), 0, map[int64]int16{p: 9})
	ticks := s.counterValue("kaas_fence_watcher_ticks_total")
	eventually(t, "two watcher ticks", func() bool { return s.counterValue("kaas_fence_watcher_ticks_total") >= ticks+2 })
	c.produceOK(pr{tp: a0, pid: p, ep: 6, seq: 0}, 2)
}

// S-33 (R-FEN-6): fence files written while the broker was down apply
// before the first produce, without waiting for a poll.
func TestS33_FencesApplyAtStartup(t *testing.T) {
	s := startScenario(t, func(c *Config) { c.FencePollInterval = time.Hour })
	c := s.conn()
	p := c.initIdempotent()
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 0}, 0)
	s.stop()
	writeFenceFile(t, s.fenceDir(), 99, map[int64]int16{p: 5})
	s.start()
	s.conn().produceCode(pr{tp: a0, pid: p, ep: 0, seq: 1}, errInvalidEpoch)
	if ticks := s.counterValue("kaas_fence_watcher_ticks_total"); ticks != 0 {
		t.Fatalf("%v watcher ticks; the fence must apply without a poll", ticks)
	}
}
