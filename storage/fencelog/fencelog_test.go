package fencelog

import (
	"os"
	"path/filepath"
	"testing"

	"kaas/storage/slotlog"
	"kaas/storage/vfs"
)

func TestRecordRoundTrip(t *testing.T) {
	rec := Encode(1<<40+7, Entry{Epoch: 32767, At: 1_700_000_000_000})
	pid, e, err := Decode(rec)
	if err != nil || pid != 1<<40+7 || e != (Entry{Epoch: 32767, At: 1_700_000_000_000}) {
		t.Fatalf("Decode = %d, %+v, %v", pid, e, err)
	}
	for _, bad := range [][]byte{rec[:18], append([]byte{2}, rec[1:]...), Encode(-1, Entry{}), Encode(1, Entry{Epoch: -1})} {
		if _, _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%x) accepted", bad)
		}
	}
}

func TestMergeKeepsTheHighestEpochAndTheLatestBump(t *testing.T) {
	m := map[int64]Entry{}
	Merge(m, 1, Entry{Epoch: 3, At: 10})
	Merge(m, 1, Entry{Epoch: 2, At: 50}) // lower epoch: ignored
	Merge(m, 1, Entry{Epoch: 3, At: 20}) // same epoch, later bump
	if m[1] != (Entry{Epoch: 3, At: 20}) {
		t.Fatalf("merged %+v", m[1])
	}
}

// Both formats read the same, and a broker's log hides its legacy file.
func TestReadBothFormatsAndPeerFiles(t *testing.T) {
	dir := t.TempDir()
	var buf []byte
	buf = slotlog.AppendFrame(buf, 0, Encode(42, Entry{Epoch: 5, At: 1}))
	buf = slotlog.AppendFrame(buf, int64(len(buf)), Encode(42, Entry{Epoch: 6, At: 2}))
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(FileName(1), string(buf))
	write(LegacyFileName(1), `{"42":9}`)
	write(LegacyFileName(2), `{"43":4}`)
	write(FileName(3), "")
	write("from-4.log.tmp", "")
	got, err := ReadFile(vfs.OS, filepath.Join(dir, FileName(1)))
	if err != nil || got[42] != 6 {
		t.Fatalf("log: %v, %v", got, err)
	}
	got, err = ReadFile(vfs.OS, filepath.Join(dir, LegacyFileName(2)))
	if err != nil || got[43] != 4 {
		t.Fatalf("legacy: %v, %v", got, err)
	}
	files, err := PeerFiles(vfs.OS, dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, FileName(1)), filepath.Join(dir, LegacyFileName(2))}
	if len(files) != len(want) || files[0] != want[0] || files[1] != want[1] {
		t.Fatalf("peer files %v, want %v", files, want)
	}
}
