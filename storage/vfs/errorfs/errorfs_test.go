package errorfs

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"kaas/storage/vfs/memfs"
)

func TestNthSyncAndDiskFull(t *testing.T) {
	e := Wrap(memfs.New())
	f, err := e.OpenFile("/log", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	e.Set(Nth(On(Sync, "log"), 2, 1, EIO))
	for i, want := range []error{nil, syscall.EIO, nil} {
		if err := f.Sync(); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("sync %d: %v, want %v", i+1, err, want)
		}
	}
	e.Set(DiskFull(On(Write, ""), 5))
	if n, err := f.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("first write: %d %v", n, err)
	}
	n, err := f.Write([]byte("defgh"))
	if n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write crossing the limit: %d %v, want 2 bytes and ENOSPC", n, err)
	}
	if n, err := f.WriteAt([]byte("x"), 0); n != 0 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %d %v", n, err)
	}
	e.Set(nil)
	if _, err := f.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if st.Size() != 7 {
		t.Fatalf("file is %d bytes, want 7 (3 + the short 2 + 2)", st.Size())
	}
}
