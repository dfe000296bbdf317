package partlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"kaas/storage/durable"
	"kaas/storage/vfs"
	"kaas/storage/vfs/memfs"
)

// TestCleanBitsAgreeWithMap: the dirty part of a pass decided by the
// map's bitmaps writes exactly what deciding every record by the map
// writes (the same groups, bytes, indexes' sources, aborted entries and
// counts), over random tables with tombstones whose horizons pass,
// keyless records, idempotent and transactional producers, committed and
// aborted transactions, and maps small enough to need several passes.
func TestCleanBitsAgreeWithMap(t *testing.T) { memfs.Rounds(t, 40, cleanBitsRound) }

func cleanBitsRound(t *testing.T, r *rand.Rand) {
	fs := memfs.New()
	if err := durable.MkdirAll(fs, "/data"); err != nil {
		t.Fatal(err)
	}
	env := durable.Env{FS: fs, DataDir: "/data", Logger: quiet}
	cfg := compactConfig()
	cfg.SegmentBytes = int64(300 + r.IntN(1500))
	dir := "/data/t-0"
	l, err := Open(env, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	keys := 2 + r.IntN(30)
	producers := map[int64]ProducerLast{}
	var seq7 int32
	now := t0
	record := func(i int) kv {
		rec := kv{key: fmt.Sprintf("k%d", r.IntN(keys)), value: fmt.Sprintf("v%d", i)}
		switch x := r.IntN(100); {
		case x < 10:
			rec.tombstone = true
		case x < 13:
			rec.keyless = true
		}
		return rec
	}
	batch := func(i int) []kv {
		recs := make([]kv, 1+r.IntN(5))
		for j := range recs {
			recs[j] = record(i*10 + j)
		}
		return recs
	}
	for round := 0; round < 6; round++ {
		for i := 0; i < 20+r.IntN(60); i++ {
			ts := now.UnixMilli()
			switch x := r.IntN(10); {
			case x < 6:
				appendSync(t, l, now, keyedBatch(-1, -1, -1, 0, ts, batch(i)...))
			case x < 8:
				recs := batch(i)
				h := appendSync(t, l, now, keyedBatch(7, 1, seq7, 0, ts, recs...))[0]
				seq7 += int32(len(recs))
				producers[7] = ProducerLast{LastDataOffset: h.LastOffset(), Epoch: 1}
			default:
				first := appendSync(t, l, now, keyedBatch(9, 0, 0, AttrTransactional, ts, batch(i)...))[0]
				for n := r.IntN(3); n > 0; n-- {
					appendSync(t, l, now, keyedBatch(-1, -1, -1, 0, ts, batch(i)...))
				}
				commit := r.IntN(2) == 0
				marker := appendSync(t, l, now, BuildMarker(9, 0, commit, 0, ts))[0]
				if !commit {
					if err := l.AppendAborted(AbortedTxn{ProducerID: 9, FirstOffset: first.BaseOffset, LastOffset: marker.BaseOffset, LastStableOffset: first.BaseOffset}); err != nil {
						t.Fatal(err)
					}
				}
				producers[9] = ProducerLast{LastDataOffset: -1, Epoch: 0}
			}
		}
		for pass := 0; pass < 4; pass++ {
			now = now.Add(time.Duration(r.IntN(1500)) * time.Millisecond) // tombstones' horizons (1 s) pass now and then
			byMap := l.PlanClean(now, l.HighWatermark(), producers, fmt.Sprintf("m%d-%d", round, pass))
			if byMap == nil {
				break
			}
			byMap.mapOnly = true
			byBits := l.PlanClean(now, l.HighWatermark(), producers, fmt.Sprintf("b%d-%d", round, pass))
			mapBytes := int64(1 + r.IntN(8)*150)
			if r.IntN(3) == 0 {
				mapBytes = 1 << 20
			}
			want, err := byMap.Run(CleanOptions{MapBytes: mapBytes})
			if err != nil {
				t.Fatal(err)
			}
			got, err := byBits.Run(CleanOptions{MapBytes: mapBytes})
			if err != nil {
				t.Fatal(err)
			}
			sameCleaning(t, fs, dir, got, want)
			want.removeFiles(env)
			if _, err := l.InstallCleaned(got, nil); err != nil {
				t.Fatal(err)
			}
			sync(t, l)
		}
	}
}

// sameCleaning fails unless two passes' results are the same but for
// their files' names.
func sameCleaning(t *testing.T, fs vfs.FS, dir string, got, want *CleanResult) {
	t.Helper()
	if got.EndOffset != want.EndOffset || got.nextHorizon != want.nextHorizon || len(got.groups) != len(want.groups) {
		t.Fatalf("bits: end %d, horizon %d, %d groups; map: end %d, horizon %d, %d groups",
			got.EndOffset, got.nextHorizon, len(got.groups), want.EndOffset, want.nextHorizon, len(want.groups))
	}
	gs, ws := got.Stats, want.Stats
	if gs.RecordsRead != ws.RecordsRead || gs.RecordsRemoved != ws.RecordsRemoved || gs.BytesWritten != ws.BytesWritten {
		t.Fatalf("bits: stats %+v; map: %+v", gs, ws)
	}
	for i, g := range got.groups {
		w := want.groups[i]
		if g.from != w.from || g.to != w.to || g.unchanged != w.unchanged || (g.seg == nil) != (w.seg == nil) || !slices.Equal(g.suffixes, w.suffixes) {
			t.Fatalf("group %d: bits %+v; map %+v", i, g, w)
		}
		if g.seg == nil {
			continue
		}
		if g.seg.next != w.seg.next || g.seg.size != w.seg.size || fmt.Sprint(g.seg.aborted) != fmt.Sprint(w.seg.aborted) {
			t.Fatalf("group %d: bits segment next %d size %d aborted %v; map next %d size %d aborted %v",
				i, g.seg.next, g.seg.size, g.seg.aborted, w.seg.next, w.seg.size, w.seg.aborted)
		}
		for _, suf := range g.suffixes {
			gb, err1 := vfs.ReadFile(fs, g.path(dir, suf))
			wb, err2 := vfs.ReadFile(fs, w.path(dir, suf))
			if err1 != nil || err2 != nil || !bytes.Equal(gb, wb) {
				t.Fatalf("group %d %s: bits and map wrote different bytes (%v, %v)", i, suf, err1, err2)
			}
		}
	}
}
