package durable_test

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"testing"

	"kaas/storage/durable"
	"kaas/storage/vfs"
	"kaas/storage/vfs/errorfs"
	"kaas/storage/vfs/memfs"
)

// TestWriteFileCrashLoop is the crash loop for every metadata file
// (topics, configs, users, the cluster id, producer id blocks): a power
// loss just before a random filesystem operation — inside MkdirAll or
// WriteFile, or between calls — keeping a random part of what was not
// fsynced. The file then holds the last version WriteFile acknowledged or
// the one being written, whole; never a torn or an older one, and the
// directories made for it are there.
func TestWriteFileCrashLoop(t *testing.T) {
	memfs.Rounds(t, 200, func(t *testing.T, r *rand.Rand) {
		m := memfs.New()
		efs := errorfs.Wrap(m)
		var crashed *memfs.FS
		at, ops := r.IntN(80), 0
		efs.Set(func(errorfs.Op) error {
			if ops == at {
				crashed = m.Crash(memfs.CrashOptions{Rand: r})
			}
			ops++
			return nil
		})
		const dir, path = "/data/__cluster/topics", "/data/__cluster/topics/t.json"
		acked, writing := 0, 0
		if err := durable.MkdirAll(efs, dir); err != nil {
			t.Fatal(err)
		}
		dirMade := crashed == nil
		for v := 1; v <= 8 && crashed == nil; v++ {
			writing = v
			if err := durable.WriteFile(efs, path, version(v)); err != nil {
				t.Fatal(err)
			}
			if crashed == nil {
				acked = v
			}
		}
		if crashed == nil {
			crashed, writing = m.Crash(memfs.CrashOptions{Rand: r}), acked
		}
		if st, err := crashed.Stat(dir); dirMade && (err != nil || !st.IsDir()) {
			t.Fatalf("directory made and fsynced before the crash is gone: %v", err)
		}
		got, err := vfs.ReadFile(crashed, path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if acked > 0 {
				t.Fatalf("version %d was acknowledged; after the crash the file is gone", acked)
			}
		case err != nil:
			t.Fatal(err)
		case string(got) != string(version(acked)) && string(got) != string(version(writing)):
			t.Fatalf("after the crash the file holds %.40q; acknowledged %d, writing %d", got, acked, writing)
		}
	})
}

// version is a file body big enough to span pages.
func version(v int) []byte {
	b := make([]byte, 9000)
	for i := range b {
		b[i] = byte('a' + v)
	}
	return append(fmt.Appendf(nil, "v%d:", v), b...)
}
