package configstore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"kaas/storage/durable"
	"kaas/storage/vfs/errorfs"
	"kaas/storage/vfs/memfs"
)

// TestEntityStoreCrashLoop: a power loss before a random filesystem
// operation leaves the entity store holding the last applied state or
// the one being applied, whole.
func TestEntityStoreCrashLoop(t *testing.T) {
	memfs.Rounds(t, 150, func(t *testing.T, r *rand.Rand) {
		m := memfs.New()
		efs := errorfs.Wrap(m)
		var crashed *memfs.FS
		at, ops := r.IntN(60), 0
		efs.Set(func(errorfs.Op) error {
			if ops == at {
				crashed = m.Crash(memfs.CrashOptions{Rand: r})
			}
			ops++
			return nil
		})
		env := durable.Env{FS: efs, DataDir: "/data"}
		s, err := OpenStore(env, 0)
		if err != nil {
			t.Fatal(err)
		}
		es := s.Entities("client-quotas")
		acked, writing := 0, 0
		for v := 1; v <= 6 && crashed == nil; v++ {
			writing = v
			if err := es.Apply("user=u", map[string]string{"producer_byte_rate": fmt.Sprint(v)}, nil); err != nil {
				t.Fatal(err)
			}
			if crashed == nil {
				acked = v
			}
		}
		if crashed == nil {
			crashed, writing = m.Crash(memfs.CrashOptions{Rand: r}), acked
		}
		s2, err := OpenStore(durable.Env{FS: crashed, DataDir: "/data"}, 0)
		if err != nil {
			if acked == 0 {
				return // the directory itself may not have survived
			}
			t.Fatal(err)
		}
		all, _, err := s2.Entities("client-quotas").Load()
		if err != nil {
			t.Fatal(err)
		}
		got := all["user=u"]["producer_byte_rate"]
		if got != fmt.Sprint(acked) && got != fmt.Sprint(writing) && !(acked == 0 && got == "") {
			t.Fatalf("after the crash: %q; acknowledged %d, writing %d", got, acked, writing)
		}
	})
}

func TestEntityStoreApply(t *testing.T) {
	s, err := OpenStore(durable.Env{FS: memfs.New(), DataDir: "/d"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	es := s.Entities("client-metrics")
	if err := es.Apply("sub", map[string]string{"metrics": "a", "interval.ms": "1000"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := es.Apply("sub", nil, []string{"metrics"}); err != nil {
		t.Fatal(err)
	}
	all, _, _ := s.Entities("client-metrics").Load()
	if len(all) != 1 || len(all["sub"]) != 1 || all["sub"]["interval.ms"] != "1000" {
		t.Fatalf("%v", all)
	}
	if err := es.Apply("sub", nil, []string{"interval.ms"}); err != nil {
		t.Fatal(err)
	}
	if all, _, _ := s.Entities("client-metrics").Load(); len(all) != 0 {
		t.Fatalf("emptied entity kept: %v", all)
	}
}

// TestEntityStoreApplyIfUnchanged: the file store's conditional write of
// several entities lands in one durable write and survives a reopen (one
// writer: it never refuses).
func TestEntityStoreApplyIfUnchanged(t *testing.T) {
	fs := memfs.New()
	s, err := OpenStore(durable.Env{FS: fs, DataDir: "/d"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	e := s.Entities("features")
	ok, err := e.ApplyIfUnchanged(map[string]map[string]string{
		"transaction.version": {"level": "1", "epoch": "1"},
		"other":               {"level": "3", "epoch": "1"},
	}, 0)
	if err != nil || !ok {
		t.Fatalf("applied=%v err=%v", ok, err)
	}
	s2, err := OpenStore(durable.Env{FS: fs, DataDir: "/d"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s2.Entities("features").Load()
	if err != nil {
		t.Fatal(err)
	}
	if got["transaction.version"]["level"] != "1" || got["other"]["level"] != "3" {
		t.Fatalf("after reopen: %v", got)
	}
}
