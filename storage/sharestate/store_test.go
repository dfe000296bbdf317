package sharestate

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"

	"kaas/storage/durable"
	"kaas/storage/slotlog"
	"kaas/storage/vfs/memfs"
)

func TestEncodeDecode(t *testing.T) {
	r := Record{Key: Key{Group: "g", Topic: [16]byte{1, 2}, Partition: 7}, Start: 42,
		Runs: []Run{{42, 44, 2, 1}, {45, 45, 0, 3}}}
	got, err := Decode(Encode(r))
	if err != nil || fmt.Sprint(got) != fmt.Sprint(r) {
		t.Fatalf("%v %v", got, err)
	}
	r.Deleted, r.Runs = true, []Run{}
	if got, err := Decode(Encode(r)); err != nil || !got.Deleted {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range [][]byte{nil, {9}, Encode(r)[:20], append(Encode(r), 0), {1, 2, 0, 0}} {
		if _, err := Decode(bad); err == nil {
			t.Fatalf("%x decoded", bad)
		}
	}
}

// TestCrashLoop moves share-partitions' start offsets up, syncing
// (answering acknowledgements) at random, and compacting as it goes, then
// simulates a power loss at a random point: after recovery every
// share-partition's start is at least the last synced one and at most the
// last written (starts only grow here), and the store opens.
func TestCrashLoop(t *testing.T) {
	memfs.Rounds(t, 100, func(t *testing.T, r *rand.Rand) {
		m := memfs.New()
		e := durable.Env{FS: m, DataDir: "/data", Logger: slog.New(slog.DiscardHandler)}
		s, loaded, err := Open(e, "/data/share")
		if err != nil || len(loaded) != 0 {
			t.Fatal(loaded, err)
		}
		keys := []Key{{Group: "a", Partition: 0}, {Group: "a", Partition: 1}, {Group: "b", Partition: 0}}
		written, synced := map[Key]int64{}, map[Key]int64{}
		deleted := false        // b's starts are then not monotonic: check a and a only
		pad := make([]Run, 200) // big records, so compaction happens
		for i := int64(1); i < 20+int64(r.IntN(600)); i++ {
			k := keys[r.IntN(len(keys))]
			if k.Group == "b" && r.IntN(10) == 0 {
				// b's share-partition is deleted and, later, begins again.
				if err := s.Put(Record{Key: k, Deleted: true}); err != nil {
					t.Fatal(err)
				}
				written[k], deleted = 0, true
				continue
			}
			if err := s.Put(Record{Key: k, Start: i, Runs: pad}); err != nil {
				t.Fatal(err)
			}
			written[k] = i
			if r.IntN(3) == 0 {
				if err := s.Sync(); err != nil {
					t.Fatal(err)
				}
				for k, v := range written {
					synced[k] = v
				}
			}
		}
		e.FS = m.Crash(memfs.CrashOptions{Rand: r})
		rs, got, err := Open(e, "/data/share")
		if err != nil {
			t.Fatalf("recovery after a crash: %v", err)
		}
		defer rs.Close()
		for _, k := range keys {
			if k.Group == "b" && deleted {
				continue
			}
			if g := got[k].Start; g < synced[k] || g > written[k] {
				t.Fatalf("%v: start %d after the crash, synced %d, written %d", k, g, synced[k], written[k])
			}
		}
	})
}

// TestPartitionTakeoverCrashLoop is the cluster layout's power-loss loop:
// a partition's share state log passes from owner to owner (each a
// higher generation, slotlog.Adopt), a deposed owner keeps writing after
// the takeover, and the power fails at a random point. After recovery the
// newest owner's file holds every start its owners synced while they
// owned it, and nothing the deposed ones wrote after they were deposed.
func TestPartitionTakeoverCrashLoop(t *testing.T) {
	memfs.Rounds(t, 100, func(t *testing.T, r *rand.Rand) {
		m := memfs.New()
		e := durable.Env{FS: m, DataDir: "/data", Logger: slog.New(slog.DiscardHandler)}
		const dir = "/data/queue-0"
		k := Key{Group: "g", Topic: [16]byte{7}, Partition: 0}
		pad := make([]Run, 100)
		var synced, written int64 // the owners' starts (they only grow)
		var deposed *Store
		gen := int64(1)
		for owner := 0; owner < 1+r.IntN(4); owner++ {
			s, loaded, err := OpenPartition(e, dir, slotlog.Owner{Gen: gen})
			if err != nil {
				t.Fatal(err)
			}
			if got := loaded[k].Start; got < synced || got > written {
				t.Fatalf("owner %d (generation %d) loaded start %d; synced %d, written %d", owner, gen, got, synced, written)
			}
			gen += int64(1 + r.IntN(2))
			if deposed != nil {
				// The deposed owner, not knowing yet, writes and syncs a
				// start no owner wrote: it must never be read.
				if err := deposed.Put(Record{Key: k, Start: 1 << 40, Runs: pad}); err == nil {
					_ = deposed.Sync()
				}
				_ = deposed.Close()
			}
			for i := 0; i < 1+r.IntN(200); i++ {
				written++
				if err := s.Put(Record{Key: k, Start: written, Runs: pad}); err != nil {
					t.Fatal(err)
				}
				if r.IntN(3) == 0 {
					if err := s.Sync(); err != nil {
						t.Fatal(err)
					}
					synced = written
				}
			}
			deposed = s
		}
		e.FS = m.Crash(memfs.CrashOptions{Rand: r})
		s, got, err := OpenPartition(e, dir, slotlog.Owner{Gen: gen})
		if err != nil {
			t.Fatalf("recovery after a crash: %v", err)
		}
		defer s.Close()
		if g := got[k].Start; g < synced || g > written {
			t.Fatalf("start %d after the crash, synced %d, written %d", g, synced, written)
		}
	})
}
