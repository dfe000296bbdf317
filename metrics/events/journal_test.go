package events

import (
	"sync"
	"testing"
)

// A flood of one kind keeps only the newest Capacity of it and never
// pushes another kind's events out.
func TestRingsAreBoundedPerKind(t *testing.T) {
	j := New()
	j.Record(Event{Kind: EpochBump, ProducerID: 7, PrevEpoch: 0, Epoch: 1, Reason: ReasonRejoin})
	for i := range 3 * Capacity {
		j.Record(Event{Kind: ZombieRejected, ProducerID: int64(i)})
	}
	bumps := j.Events(EpochBump)
	if len(bumps) != 1 || bumps[0].ProducerID != 7 || bumps[0].At.IsZero() || bumps[0].Seq != 1 {
		t.Fatalf("bumps %+v", bumps)
	}
	z := j.Events(ZombieRejected)
	if len(z) != Capacity || z[0].ProducerID != 2*Capacity || z[len(z)-1].ProducerID != 3*Capacity-1 {
		t.Fatalf("kept %d zombies, from %d to %d", len(z), z[0].ProducerID, z[len(z)-1].ProducerID)
	}
	if all := j.Events(); len(all) != Capacity+1 || all[0].Kind != EpochBump {
		t.Fatalf("all events: %d, first %s", len(all), all[0].Kind)
	}
	if got := j.Recorded(ZombieRejected); got != 3*Capacity {
		t.Fatalf("recorded %d zombies", got)
	}
}

// Writers on many goroutines never lose the count, and every event a
// reader sees is whole (run under -race).
func TestConcurrentRecordAndRead(t *testing.T) {
	j := New()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				j.Record(Event{Kind: Fence, ProducerID: int64(w), Epoch: int16(i)})
			}
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, e := range j.Events() {
				if e.Kind != Fence || e.Seq == 0 {
					t.Errorf("torn event %+v", e)
					return
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	readers.Wait()
	if j.Version() != 1600 || len(j.Events()) != Capacity {
		t.Fatalf("version %d, kept %d", j.Version(), len(j.Events()))
	}
}

func TestNilJournalRecordsNothing(t *testing.T) {
	var j *Journal
	j.Record(Event{Kind: Fence})
	if j.Events() != nil || j.Version() != 0 {
		t.Fatal("a nil journal returned events")
	}
}

// BenchmarkRecord is the cost an actor pays to record one event (the
// produce path pays it only when it rejects a zombie batch).
func BenchmarkRecord(b *testing.B) {
	j := New()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			j.Record(Event{Kind: ZombieRejected, ProducerID: 1, Where: "orders-0", Code: "INVALID_PRODUCER_EPOCH"})
		}
	})
}
