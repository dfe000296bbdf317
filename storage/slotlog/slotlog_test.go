package slotlog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"kaas/storage/durable"
	"kaas/storage/vfs"
	"kaas/storage/vfs/memfs"
)

var quiet = slog.New(slog.DiscardHandler)

func env(dir string) durable.Env { return durable.Env{DataDir: dir, Logger: quiet} }

func open(t *testing.T, e durable.Env, path string) (*Log, []string) {
	t.Helper()
	var got []string
	l, err := Open(e, "test log", path, func(f Frame) error {
		got = append(got, string(f.Payload))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, got
}

// refused checks that opening path fails with a CorruptError naming it
// and the byte offset at.
func refused(t *testing.T, e durable.Env, path string, at int64) {
	t.Helper()
	_, err := Open(e, "test log", path, func(Frame) error { return nil })
	var cerr *durable.CorruptError
	if !errors.As(err, &cerr) || cerr.Path != path || cerr.Offset != at {
		t.Fatalf("open: %v, want a CorruptError for %s at %d", err, path, at)
	}
}

func appendSync(t *testing.T, l *Log, recs ...string) {
	t.Helper()
	for _, r := range recs {
		if err := l.Append([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestTornTailIsCut: a crash's leftovers after the last record (a short
// frame, garbage, zeros) are cut, and appends go on after the cut.
func TestTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "slot.log")
	l, _ := open(t, env(dir), path)
	l.Preallocate()
	appendSync(t, l, "a", "b")
	whole := l.Size()
	if err := l.Append([]byte("unsynced")); err != nil {
		t.Fatal(err)
	}
	end := l.Size() // the file goes on with preallocated zeros
	l.Close()
	data, _ := os.ReadFile(path)
	for _, tail := range [][]byte{data[whole : end-3], []byte("garbage"), make([]byte, 100)} {
		if err := os.WriteFile(path, append(append([]byte(nil), data[:whole]...), tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		l, got := open(t, env(dir), path)
		if fmt.Sprint(got) != "[a b]" || l.Size() != whole {
			t.Fatalf("after a torn tail %q: %v, size %d", tail, got, l.Size())
		}
		appendSync(t, l, "c")
		l.Close()
		if _, got := open(t, env(dir), path); fmt.Sprint(got) != "[a b c]" {
			t.Fatalf("after appending: %v", got)
		}
	}
}

// TestCorruptionInTheMiddle is issue 9 rows 3 and 4: one damaged record
// followed by records written after it was fsynced used to be cut with
// everything after it. Now the open fails naming the file and the byte
// offset and changes nothing; with SkipCorrupt the file is quarantined
// and every intact record — before and after the damage — is kept.
func TestCorruptionInTheMiddle(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "slot.log")
	l, _ := open(t, env(dir), path)
	appendSync(t, l, "one")
	at := l.Size()
	appendSync(t, l, "two")
	appendSync(t, l, "three", "four")
	l.Close()
	data, _ := os.ReadFile(path)
	data[at+10] ^= 0x40 // inside "two"'s frame
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, env(dir), path, at)
	if now, _ := os.ReadFile(path); string(now) != string(data) {
		t.Fatal("a refused open changed the file")
	}
	e := env(dir)
	e.SkipCorrupt = true
	l, got := open(t, e, path)
	if fmt.Sprint(got) != "[one three four]" {
		t.Fatalf("salvaged %v", got)
	}
	moved, _ := filepath.Glob(filepath.Join(dir, durable.QuarantineDir, "*", "slot.log"))
	if len(moved) != 1 {
		t.Fatalf("quarantine holds %v", moved)
	}
	appendSync(t, l, "five")
	l.Close()
	if _, got := open(t, env(dir), path); fmt.Sprint(got) != "[one three four five]" {
		t.Fatalf("after salvage and append: %v", got)
	}
}

// TestCorruptionInACompactedLog: a compacted file is durable as a whole
// before it replaces the log, so damage in its middle refuses the open
// too (its frames used to vouch for nothing, and the damage was cut as a
// torn tail with every record after it).
func TestCorruptionInACompactedLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "slot.log")
	l, _ := open(t, env(dir), path)
	appendSync(t, l, "one", "two", "three")
	if err := l.Rewrite(func(yield func([]byte) bool) {
		for _, r := range []string{"one", "two", "three"} {
			yield([]byte(r))
		}
	}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	data, _ := os.ReadFile(path)
	at := int64(headerLen + markedLen + len("one"))
	data[at+10] ^= 0x40 // inside "two"'s frame
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, env(dir), path, at)
}

// TestCorruptLastRecordAfterCleanClose: a clean close seals the log, so
// damage in its last record is corruption (refused), not a torn tail; a
// reopen that appends nothing adds no second seal; appends go on after
// the seal.
func TestCorruptLastRecordAfterCleanClose(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "slot.log")
	l, _ := open(t, env(dir), path)
	appendSync(t, l, "one", "two")
	at := l.Size() - int64(headerLen+markedLen+len("two"))
	l.Close()
	sealed, _ := os.ReadFile(path)
	l, got := open(t, env(dir), path)
	l.Close()
	if now, _ := os.ReadFile(path); fmt.Sprint(got) != "[one two]" || len(now) != len(sealed) {
		t.Fatalf("reopened: %v, %d bytes (sealed: %d)", got, len(now), len(sealed))
	}
	data := append([]byte(nil), sealed...)
	data[at+12] ^= 0x01 // inside "two"'s frame
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, env(dir), path, at)
	if err := os.WriteFile(path, sealed, 0o644); err != nil {
		t.Fatal(err)
	}
	l, _ = open(t, env(dir), path)
	appendSync(t, l, "three")
	l.Close()
	if _, got := open(t, env(dir), path); fmt.Sprint(got) != "[one two three]" {
		t.Fatalf("after appending past the seal: %v", got)
	}
}

// TestCrashLoop: records appended and synced at random, a power loss at a
// random point keeping a random part of what was not fsynced: recovery
// never reports corruption, keeps every synced record in order, and only
// adds whole records that were appended after them — with the file
// preallocated (most rounds, whose records cross chunks) or not.
func TestCrashLoop(t *testing.T) {
	memfs.Rounds(t, 200, func(t *testing.T, r *rand.Rand) {
		m, l := crashLoopLog(t)
		if r.IntN(4) != 0 {
			l.Preallocate() // records cross preallocation chunks too
		}
		var written []string
		synced := 0
		for i := 0; i < 5+r.IntN(100); i++ {
			switch r.IntN(4) {
			case 0, 1:
				rec := fmt.Sprintf("%d:%s", i, make([]byte, r.IntN(3000)))
				if err := l.Append([]byte(rec)); err != nil {
					t.Fatal(err)
				}
				written = append(written, rec)
			case 2:
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				synced = len(written)
			case 3:
				if r.IntN(8) == 0 && l.Sync() == nil {
					synced = len(written)
					// Compaction keeps every record here.
					all := append([]string(nil), written...)
					if err := l.Rewrite(func(yield func([]byte) bool) {
						for _, w := range all {
							yield([]byte(w))
						}
					}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		checkCrashRecovery(t, m.Crash(memfs.CrashOptions{Rand: r}), synced, written)
	})
}

// TestPreallocatedTailIsKept: records past a preallocation chunk extend
// the file with zeros; a reopen keeps those zeros as room (nothing cut,
// no torn-tail warning), writes the next records over them, and reads
// every record back.
func TestPreallocatedTailIsKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "slot.log")
	l, _ := open(t, env(dir), path)
	l.Preallocate()
	var want []string
	for i := 0; i < 3*preallocChunk/1000; i++ {
		rec := fmt.Sprintf("%04d:%0990d", i, i)
		want = append(want, rec)
		appendSync(t, l, rec)
	}
	size := l.Size()
	fi, _ := os.Stat(path)
	if fi.Size() <= size {
		t.Fatalf("file is %d bytes for %d of records: no room preallocated", fi.Size(), size)
	}
	if err := l.f.Sync(); err != nil { // a crash now: no seal
		t.Fatal(err)
	}
	var warned bytes.Buffer
	e := env(dir)
	e.Logger = slog.New(slog.NewTextHandler(&warned, nil))
	l2, got := open(t, e, path)
	if fmt.Sprint(got) != fmt.Sprint(want) || l2.Size() != size || warned.Len() != 0 {
		t.Fatalf("reopened: %d records (want %d), size %d (want %d), log %q", len(got), len(want), l2.Size(), size, warned.String())
	}
	if fi2, _ := os.Stat(path); fi2.Size() != fi.Size() {
		t.Fatalf("reopen changed the file's length from %d to %d", fi.Size(), fi2.Size())
	}
	l2.Preallocate()
	appendSync(t, l2, "last")
	l2.Close()
	l.f.Close()
	if _, got := open(t, env(dir), path); fmt.Sprint(got) != fmt.Sprint(append(want, "last")) {
		t.Fatalf("after appending over the zeros: %d records", len(got))
	}
}

// crashLoopLog is a crash loop round's start: /d/slot.log opened on a
// fresh in-memory filesystem, which the round crashes at its end.
func crashLoopLog(t *testing.T) (*memfs.FS, *Log) {
	t.Helper()
	m := memfs.New()
	if err := durable.MkdirAll(m, "/d"); err != nil {
		t.Fatal(err)
	}
	e := durable.Env{FS: m, DataDir: "/d", Logger: quiet}
	l, _ := open(t, e, "/d/slot.log")
	return m, l
}

// checkCrashRecovery opens /d/slot.log on the crashed filesystem fs: the
// crash loops' one check that recovery reports no corruption and finds
// a prefix of what was written holding at least the synced records.
func checkCrashRecovery(t *testing.T, fs vfs.FS, synced int, written []string) {
	t.Helper()
	var got []string
	rl, err := Open(durable.Env{FS: fs, DataDir: "/d", Logger: quiet}, "test log", "/d/slot.log", func(f Frame) error {
		got = append(got, string(f.Payload))
		return nil
	})
	if err != nil {
		t.Fatalf("recovery after a crash: %v", err)
	}
	rl.Close()
	if len(got) < synced || len(got) > len(written) {
		t.Fatalf("recovered %d records, %d were synced and %d written", len(got), synced, len(written))
	}
	for i := range got {
		if got[i] != written[i] {
			t.Fatalf("record %d differs", i)
		}
	}
}
