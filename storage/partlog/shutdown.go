package partlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"kaas/storage/vfs"
)

// cleanShutdownFile marks a partition directory whose log was closed
// cleanly: the last segment is then trusted like a sealed one.
//
// The marker names the segment it vouches for and its length
// ("<base> <bytes>"), and vouches only while the directory's last segment
// is that one at that length. A marker that does not describe the last
// segment is ignored (the start recovers from the recovery point, which
// is only slower): in a cluster a broker paused between Close's last
// lease check and the marker's write can resume after a peer took the
// partition over, and its marker must not make the peer's active segment
// (its preallocated room, a torn tail after a crash) trusted. An empty
// marker vouches as it always did: an earlier build wrote it (and never
// preallocated), or a power loss emptied one this build wrote after its
// close had fsynced everything (the marker itself is not fsynced).
const cleanShutdownFile = ".clean-shutdown"

// cleanMarker is what a clean-shutdown marker says: the active segment's
// base offset and its length in bytes (its batches; the room is cut).
type cleanMarker struct{ base, size int64 }

func (m cleanMarker) encode() []byte {
	return []byte(strconv.FormatInt(m.base, 10) + " " + strconv.FormatInt(m.size, 10) + "\n")
}

func parseCleanMarker(b []byte) (cleanMarker, error) {
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return cleanMarker{}, errors.New("not \"<base> <bytes>\"")
	}
	base, err1 := strconv.ParseInt(f[0], 10, 64)
	size, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || base < 0 || size < 0 {
		return cleanMarker{}, fmt.Errorf("bad fields %q", f)
	}
	return cleanMarker{base: base, size: size}, nil
}

// markCleanShutdown records that Close completed, so the next start can
// trust the last segment and its indexes. It needs no fsync: without it
// (or with it empty after a power loss) the next start only does more
// work.
func markCleanShutdown(fsys vfs.FS, dir string, m cleanMarker) error {
	f, err := fsys.OpenFile(filepath.Join(dir, cleanShutdownFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(m.encode())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cleanlyClosed reports whether the directory's clean-shutdown marker
// vouches for its last segment (bases, in order): it names that segment
// at the file's length.
func (l *Log) cleanlyClosed(bases []int64) bool {
	b, err := vfs.ReadFile(l.env.FS, filepath.Join(l.dir, cleanShutdownFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err == nil && len(b) == 0 {
		return true
	}
	m, perr := parseCleanMarker(b)
	if err == nil {
		err = perr
	}
	if err == nil && len(bases) > 0 && m.base == bases[len(bases)-1] {
		var fi fs.FileInfo
		if fi, err = l.env.FS.Stat(segmentPath(l.dir, m.base, logSuffix)); err == nil && fi.Size() == m.size {
			return true
		} else if err == nil {
			err = fmt.Errorf("the segment is %d bytes", fi.Size())
		}
	} else if err == nil {
		err = errors.New("another segment is the last one")
	}
	l.env.Logger.Warn("ignoring a clean-shutdown marker that does not describe the last segment (written by a deposed owner, or changed since); recovering from the recovery point",
		"dir", l.dir, "marker", strings.TrimSpace(string(b)), "err", err)
	return false
}
