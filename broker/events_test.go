package broker

// The events journal behind the inspector's KIP-360 timeline: epoch bumps
// and why, fences put in force here and from peers' files, and zombie
// batches rejected, each recorded once with where and why.

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"kaas/metrics/events"
)

// journal returns the broker's events of kind k.
func (s *scenarioBroker) journal(k events.Kind) []events.Event { return s.b.metrics.Events.Events(k) }

func TestJournalRecordsBumpsFencesAndZombies(t *testing.T) {
	s := startScenario(t, func(c *Config) { c.FencePollInterval = 20 * time.Millisecond })
	c := s.conn()
	p, _ := c.initTxn() // (P,0): a new producer id, nothing to fence
	wantIPI(t, "IPI{} → (P,1)", c.ipi(ipiReq(-1, -1)), 0, p, 1)
	c.produceCode(pr{tp: a1, pid: p, ep: 0, seq: 0}, errInvalidEpoch) // a zombie of session 0

	fences := s.journal(events.Fence)
	if len(fences) != 1 || fences[0].ProducerID != p || fences[0].Epoch != 1 || fences[0].PrevEpoch != -1 || fences[0].Reason != "local" {
		t.Fatalf("fence events %+v, want one local fence of (%d, 1) over no floor", fences, p)
	}
	z := s.journal(events.ZombieRejected)
	if len(z) != 1 || z[0].Where != "a-1" || z[0].Code != "INVALID_PRODUCER_EPOCH" || z[0].Epoch != 0 || z[0].PrevEpoch != 1 {
		t.Fatalf("zombie events %+v, want a-1 refusing epoch 0 under epoch 1", z)
	}

	// A rejoin mid-transaction aborts at a bumped epoch, and the retry
	// bumps again: each bump says why.
	c.aptOK(p, 1, a0)
	wantIPI(t, "IPI{} mid-transaction", c.ipi(ipiReq(-1, -1)), errConcurrent, -1, -1)
	wantIPI(t, "IPI{} after the abort", c.ipi(ipiReq(-1, -1)), 0, p, 3)
	var got []string
	for _, e := range s.journal(events.EpochBump) {
		if e.ProducerID != p || e.TransactionalID != scnTxnID {
			t.Errorf("bump of another producer: %+v", e)
		}
		got = append(got, fmt.Sprintf("%s %d→%d", e.Reason, e.PrevEpoch, e.Epoch))
	}
	if want := []string{"rejoin 0→1", "rejoin-abort 1→2", "rejoin 2→3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("epoch bumps %q, want %q", got, want)
	}

	// A peer's fence file raises the floor here: recorded as a peer
	// fence naming the file, with how old the file was.
	writeFenceFile(t, s.fenceDir(), 7, map[int64]int16{p: 5})
	eventually(t, "the peer's fence is journaled", func() bool { return len(s.journal(events.Fence)) == 4 })
	peer := s.journal(events.Fence)[3]
	if peer.Reason != "peer" || peer.Where != "from-7.json" || peer.Epoch != 5 || peer.PrevEpoch != 3 || peer.LagMs < 0 {
		t.Fatalf("peer fence event %+v", peer)
	}
	// The summary is published once the poll that applied it ends.
	eventually(t, "the fence summary shows when from-7.json was applied", func() bool {
		sum := s.b.fence.Summary()
		return len(sum.PeerFiles) == 1 && !sum.PeerFiles[0].LastApplied.IsZero() && sum.PeerFiles[0].LagMs >= 0
	})

	// An accepted batch records nothing.
	c.produceOK(pr{tp: a2, pid: p, ep: 5, seq: 0}, 0)
	if n := len(s.journal(events.ZombieRejected)); n != 1 {
		t.Fatalf("%d zombie events after an accepted batch", n)
	}
}
