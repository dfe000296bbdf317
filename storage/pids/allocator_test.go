package pids

import (
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"kaas/storage/durable"
	"kaas/storage/vfs"
	"kaas/storage/vfs/errorfs"
	"kaas/storage/vfs/memfs"
)

// R-IPI-4 / S-18: ids are unique across restarts and brokers.
func TestIDsNeverReusedAcrossRestartsAndBrokers(t *testing.T) {
	dir := t.TempDir()
	seen := map[int64]bool{}
	take := func(a *Allocator, n int) {
		for i := 0; i < n; i++ {
			id, err := a.Next()
			if err != nil {
				t.Fatal(err)
			}
			if id < 0 || seen[id] {
				t.Fatalf("id %d reused or negative", id)
			}
			seen[id] = true
		}
	}
	for restart := 0; restart < 3; restart++ {
		for _, broker := range []int32{0, 1} {
			a, err := Open(durable.Env{DataDir: dir}, broker)
			if err != nil {
				t.Fatal(err)
			}
			take(a, 3+restart*BlockSize/2)
		}
	}
	a, _ := Open(durable.Env{DataDir: dir}, 0)
	id, _ := a.Next()
	if id>>40 != 1 {
		t.Fatalf("broker 0 id %d is not in its range", id)
	}
}

// TestCrashNeverReusesIDs: ids handed out before a power loss at any
// point are never handed out again after it (the block end is durable
// before any id of the block is used).
func TestCrashNeverReusesIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	m := memfs.New()
	env := durable.Env{FS: m, DataDir: "/data"}
	seen := map[int64]bool{}
	for round := 0; round < memfs.Iterations(20); round++ {
		a, err := Open(env, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := r.IntN(2 * BlockSize); i > 0; i-- {
			id, err := a.Next()
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("round %d: id %d handed out twice", round, id)
			}
			seen[id] = true
		}
		m = m.Crash(memfs.CrashOptions{Rand: r})
		env.FS = m
	}
}

type countFailures struct{ n map[string]int }

func (c countFailures) Failed(store string) { c.n[store]++ }
func (c countFailures) Quarantined(string)  {}

// TestBlockWriteFailureIsFinal: when persisting a new block fails (EIO on
// its fsync), whether the new block end reached the disk is unknown, so
// no id is handed out until a restart reads what did — even once the disk
// answers again; the failure is reported once. A restart never reissues
// an id handed out before.
func TestBlockWriteFailureIsFinal(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.Wrap(vfs.OS)
	obs := countFailures{n: map[string]int{}}
	env := durable.Env{FS: efs, DataDir: dir, Observer: obs}
	a, err := Open(env, 0)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := 0; i < BlockSize; i++ {
		if last, err = a.Next(); err != nil {
			t.Fatal(err)
		}
	}
	efs.Set(errorfs.Nth(errorfs.On(errorfs.Sync, "producer_ids"), 1, 1, syscall.EIO))
	if _, err := a.Next(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Next after a failed block write: %v, want EIO", err)
	}
	efs.Set(nil)
	if _, err := a.Next(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Next once the disk answers again: %v, want the latched EIO", err)
	}
	if obs.n["producer id allocator"] != 1 {
		t.Fatalf("failures reported: %v", obs.n)
	}
	a, err = Open(durable.Env{DataDir: dir}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.Next(); err != nil || id <= last {
		t.Fatalf("first id after the restart: %d (%v); %d was handed out before", id, err, last)
	}
}
