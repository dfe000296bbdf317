package sharepartition

import (
	"math/rand/v2"
	"testing"
	"time"
)

// scanDeadline is the earliest lock by a scan of the window: what the
// heap must answer.
func scanDeadline(p *Partition) (time.Time, bool) {
	var d time.Time
	for _, r := range p.InFlight(1 << 30) {
		if r.State == Acquired && (d.IsZero() || r.Deadline.Before(d)) {
			d = r.Deadline
		}
	}
	return d, !d.IsZero()
}

// TestLocksMatchScan: through random acquisitions, acknowledgements of
// every kind (renews among them), member releases, expiries, lock
// durations that change and resets, the lock heap's NextDeadline is the
// earliest deadline of the Acquired records, Expire releases exactly the
// records a scan finds due, and the heap stays within its bound.
func TestLocksMatchScan(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		now := time.Unix(1000, 0)
		p := New(0, cfg(time.Second, 4, 200))
		members := []string{"A", "B", "C"}
		var logEnd int64
		for step := 0; step < 2000; step++ {
			now = now.Add(time.Duration(rng.IntN(200)) * time.Millisecond)
			m := members[rng.IntN(len(members))]
			switch op := rng.IntN(10); {
			case op < 4:
				logEnd += int64(rng.IntN(20))
				if logEnd > p.FetchOffset(now) {
					p.Acquire(m, []Batch{{First: p.Start(), Last: logEnd - 1}}, Want{MaxRecords: 1 + rng.IntN(50), BatchSize: rng.IntN(10), Mode: Mode(rng.IntN(2))}, now)
				}
			case op < 7:
				var acks []AckBatch
				for _, r := range p.InFlight(1 << 30) {
					if r.State == Acquired && r.Member == m && rng.IntN(3) == 0 {
						acks = append(acks, AckBatch{First: r.Offset, Last: r.Offset, Types: []AckType{AckType(1 + rng.IntN(4))}})
					}
				}
				p.Acknowledge(m, acks, true, now)
			case op == 7:
				p.ReleaseMember(m, now)
			case op == 8:
				p.SetConfig(cfg(time.Duration(1+rng.IntN(3))*time.Second, 4, 200))
			default:
				if rng.IntN(50) == 0 {
					p.Reset(logEnd)
				}
			}
			want := 0
			for _, r := range p.InFlight(1 << 30) {
				if r.State == Acquired && !now.Before(r.Deadline) {
					want++
				}
			}
			if got := p.Expire(now); got != want {
				t.Fatalf("seed %d step %d: expired %d, a scan finds %d due", seed, step, got, want)
			}
			checkRuns(t, "random", p)
			wd, wok := scanDeadline(p)
			if d, ok := p.NextDeadline(); ok != wok || !d.Equal(wd) {
				t.Fatalf("seed %d step %d: next deadline %v %v, a scan finds %v %v", seed, step, d, ok, wd, wok)
			}
			if n := len(p.runs); len(p.locks) > 2*n+64+1 {
				t.Fatalf("seed %d step %d: %d lock entries for %d in-flight entries", seed, step, len(p.locks), n)
			}
		}
	}
}
