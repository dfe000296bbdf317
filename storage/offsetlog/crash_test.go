package offsetlog

import (
	"log/slog"
	"math/rand/v2"
	"testing"

	"kaas/storage/durable"
	"kaas/storage/vfs/memfs"
)

// TestCrashLoop commits offsets for a few groups across slots, syncing
// (acknowledging) at random and compacting when due, then simulates a
// power loss at a random point: after recovery every group's committed
// offset is at least the last acknowledged one and at most the last
// written (offsets only grow here), and never an error.
func TestCrashLoop(t *testing.T) {
	memfs.Rounds(t, 100, func(t *testing.T, r *rand.Rand) {
		m := memfs.New()
		e := durable.Env{FS: m, DataDir: "/data", Logger: slog.New(slog.DiscardHandler)}
		opts := Options{CompactMinBytes: 2048}
		d, err := OpenDir(e, "/data/offsets", opts)
		if err != nil {
			t.Fatal(err)
		}
		groups := []string{"g0", "g1", "g2", "g3"}
		written := map[string]int64{}
		acked := map[string]int64{}
		// seen: what a reader of each slot's view saw, last record per
		// key, and the slot's high watermark then.
		seen := map[int]map[string]int64{}
		seenHW := map[int]int64{}
		dirty := map[*Slot]bool{}
		for i := 1; i < 20+r.IntN(300); i++ {
			g := groups[r.IntN(len(groups))]
			s, err := d.Slot(int(g[1]-'0') % 2)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(plain(OffsetRecord(g, tpA0, off(int64(i))))); err != nil {
				t.Fatal(err)
			}
			written[g] = int64(i)
			dirty[s] = true
			if r.IntN(3) == 0 {
				for s := range dirty {
					if err := s.Sync(); err != nil {
						t.Fatal(err)
					}
					if s.NeedsCompaction() {
						if err := s.Compact(); err != nil {
							t.Fatal(err)
						}
					}
				}
				clear(dirty)
				for g, v := range written {
					acked[g] = v
				}
				for _, sl := range d.Existing() {
					m := map[string]int64{}
					for k, r := range viewLatest(sl.View()) {
						m[k] = r.Offset
					}
					seen[sl.Num] = m
					_, seenHW[sl.Num], _ = sl.View().Offsets()
				}
			}
		}
		c := m.Crash(memfs.CrashOptions{Rand: r})
		e.FS = c
		rd, err := OpenDir(e, "/data/offsets", opts)
		if err != nil {
			t.Fatalf("recovery after a crash: %v", err)
		}
		defer rd.Close()
		for _, g := range groups {
			s, err := rd.Slot(int(g[1]-'0') % 2)
			if err != nil {
				t.Fatal(err)
			}
			got := committed(s.State(), g)
			if got < acked[g] && !(acked[g] == 0 && got == -1) || got > written[g] {
				t.Fatalf("group %s: committed %d after recovery; acknowledged %d, last written %d", g, got, acked[g], written[g])
			}
		}
		// What a reader saw is never taken back: the high watermark and
		// each key's latest offset only move forward.
		for n, keys := range seen {
			s, err := rd.Slot(n)
			if err != nil {
				t.Fatal(err)
			}
			if _, hw, _ := s.View().Offsets(); hw < seenHW[n] {
				t.Fatalf("slot %d: high watermark %d after recovery, a reader saw %d", n, hw, seenHW[n])
			}
			latest := viewLatest(s.View())
			for k, o := range keys {
				if r, ok := latest[k]; !ok || r.Offset < o {
					t.Fatalf("slot %d: key %q at %d (present %v) after recovery, a reader saw it at %d", n, k, r.Offset, ok, o)
				}
			}
		}
	})
}
