package memfs

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"testing"

	"kaas/storage/durable"
)

func write(t *testing.T, m *FS, name string, data string, sync bool) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
}

func content(t *testing.T, m *FS, name string) (string, bool) {
	t.Helper()
	b, err := m.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// TestCrashKeepsOnlyWhatWasSynced is the strict model: file bytes after
// the last fsync and directory entries not fsynced are lost.
func TestCrashKeepsOnlyWhatWasSynced(t *testing.T) {
	m := New()
	if err := durable.MkdirAll(m, "/data/a"); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/data/a/synced", "one", true)
	if err := durable.SyncDir(m, "/data/a"); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/data/a/synced", "two", false)       // data not synced
	write(t, m, "/data/a/unlinked", "x", true)        // entry not synced
	write(t, m, "/data/nodir", "y", true)             // entry in /data not synced
	if err := m.Mkdir("/data/b", 0o755); err != nil { // never synced
		t.Fatal(err)
	}
	c := m.Crash(CrashOptions{})
	if got, ok := content(t, c, "/data/a/synced"); !ok || got != "one" {
		t.Fatalf("synced file after crash: %q %v", got, ok)
	}
	for _, lost := range []string{"/data/a/unlinked", "/data/nodir", "/data/b"} {
		if _, err := c.Stat(lost); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s survived the crash without a directory fsync: %v", lost, err)
		}
	}
	// The crashed filesystem is durable as it stands.
	if again := c.Crash(CrashOptions{}); again.Dump() != c.Dump() {
		t.Fatalf("a second crash changed things:\n%s\nvs\n%s", again.Dump(), c.Dump())
	}
	// The original is untouched.
	if got, _ := content(t, m, "/data/a/synced"); got != "onetwo" {
		t.Fatalf("original changed: %q", got)
	}
}

// TestCrashRenameAndRewrite: durable.WriteFile's temp + fsync + rename +
// directory fsync survives; a rename without the directory fsync leaves
// the old content; an overwrite never synced leaves the synced bytes.
func TestCrashRenameAndRewrite(t *testing.T) {
	m := New()
	if err := durable.MkdirAll(m, "/d"); err != nil {
		t.Fatal(err)
	}
	if err := durable.WriteFile(m, "/d/meta", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	c := m.Crash(CrashOptions{})
	if got, _ := content(t, c, "/d/meta"); got != "v1" {
		t.Fatalf("after WriteFile and crash: %q", got)
	}
	write(t, m, "/d/tmp", "v2", true)
	if err := m.Rename("/d/tmp", "/d/meta"); err != nil {
		t.Fatal(err)
	}
	c = m.Crash(CrashOptions{})
	if got, _ := content(t, c, "/d/meta"); got != "v1" {
		t.Fatalf("rename without a directory fsync survived: %q", got)
	}
	f, _ := m.OpenFile("/d/meta", os.O_RDWR, 0)
	f.WriteAt([]byte("XX"), 0)
	f.Truncate(1)
	c = m.Crash(CrashOptions{})
	if got, _ := content(t, c, "/d/meta"); got != "v2" && got != "v1" {
		t.Fatalf("unsynced overwrite reached the disk: %q", got)
	}
}

// TestCrashWithWriteback: with a random source some unsynced bytes and
// directory changes survive — only ever a prefix of the unsynced tail
// (possibly with zeroed pages), never anything that was not written.
func TestCrashWithWriteback(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sawPartial := false
	for i := 0; i < 200; i++ {
		m := New()
		if err := durable.MkdirAll(m, "/d"); err != nil {
			t.Fatal(err)
		}
		write(t, m, "/d/f", "synced|", true)
		if err := durable.SyncDir(m, "/d"); err != nil {
			t.Fatal(err)
		}
		tail := make([]byte, 10000)
		for j := range tail {
			tail[j] = 'a' + byte(j%26)
		}
		write(t, m, "/d/f", string(tail), false)
		c := m.Crash(CrashOptions{Rand: r})
		got, ok := content(t, c, "/d/f")
		if !ok || len(got) < 7 || got[:7] != "synced|" || len(got) > 7+len(tail) {
			t.Fatalf("content after crash: %d bytes %q...", len(got), got[:min(len(got), 20)])
		}
		for j := 7; j < len(got); j++ {
			if got[j] != 0 && got[j] != tail[j-7] {
				t.Fatalf("byte %d is %q, never written there", j, got[j])
			}
		}
		if len(got) > 7 {
			sawPartial = true
		}
	}
	if !sawPartial {
		t.Fatal("writeback never kept any unsynced byte")
	}
}
