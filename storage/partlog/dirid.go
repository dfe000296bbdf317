package partlog

import (
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path/filepath"
	"strings"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// A partition directory is named by its topic's name and partition
// (<topic>-<n>), so a directory a deleted topic left behind — its owner's
// lease in doubt at the deletion, or the broker dying during it — would
// be opened as the partition of a topic created again under that name,
// its records and producers and all. The directory therefore names its
// topic's id in partition.metadata (Apache's file and format), and a
// directory that names another id is moved aside and removed before the
// partition opens, as Apache's log manager does with a stray log.
//
// A directory without the file (written by a build before it, or
// created and left empty by a crash before the file) is adopted: the
// file is written and the directory kept. An unreadable file is adopted
// too, with a warning: the file guards against a stale directory, it
// holds nothing a client was told about.
const topicIDFile = "partition.metadata"

// strayDir is where a stray directory is moved before it is removed:
// beside it, named by a hash of its name (Apache's is
// <topic>-<n>.<unique id>-stray, the topic cut to fit; a name of its own
// would not fit beside a 249-character topic's directory). One per
// directory is enough here, and a fixed name lets the next claim remove
// what a crash between the rename and the removal left. It ends in
// ".stray", never in a partition directory's -<n>.
func strayDir(dir string) string {
	h := fnv.New64a()
	h.Write([]byte(filepath.Base(dir)))
	return filepath.Join(filepath.Dir(dir), fmt.Sprintf(".%016x.stray", h.Sum64()))
}

// encodeTopicID is Apache's Uuid.toString: URL-safe base64, no padding.
func encodeTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func encodeDirID(id [16]byte) []byte {
	return []byte("version: 0\ntopic_id: " + encodeTopicID(id) + "\n")
}

func parseDirID(b []byte) ([16]byte, error) {
	var id [16]byte
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "version: 0" {
		return id, errors.New("not a version 0 partition.metadata")
	}
	v, ok := strings.CutPrefix(lines[1], "topic_id: ")
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if !ok || err != nil || len(raw) != len(id) {
		return id, fmt.Errorf("bad topic_id line %q", lines[1])
	}
	copy(id[:], raw)
	return id, nil
}

// ClaimDir makes dir the directory of the topic whose id is id before the
// partition opens there: a directory of another id (a deleted topic's) is
// moved aside and removed, and the id file is written where it is
// missing. mayAct is the partition's lease gate (nil: always open),
// asked before each change; closed, ClaimDir changes nothing and returns
// ErrStaleTakeOver. A zero id (a partition not in a topic store, as in
// some tests) claims nothing.
func ClaimDir(env durable.Env, dir string, id [16]byte, mayAct func() bool) error {
	if id == ([16]byte{}) {
		return nil
	}
	env = env.Or()
	fsys := env.FS
	may := func() error {
		if mayAct != nil && !mayAct() {
			return fmt.Errorf("%s: %w", dir, ErrStaleTakeOver)
		}
		return nil
	}
	path := filepath.Join(dir, topicIDFile)
	b, err := vfs.ReadFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		had, perr := parseDirID(b)
		if perr != nil {
			env.Logger.Warn("ignoring an unreadable partition.metadata; adopting the directory", "dir", dir, "err", perr)
			break
		}
		if had == id {
			return nil
		}
		if err := may(); err != nil {
			return err
		}
		if err := removeStray(env, dir, had); err != nil {
			return err
		}
	}
	if err := may(); err != nil {
		return err
	}
	if err := fsys.RemoveAll(strayDir(dir)); err != nil { // a crash's leftover, if any
		return err
	}
	if err := durable.MkdirAll(fsys, dir); err != nil {
		return err
	}
	// Durable before the log opens: a directory holding records whose id
	// file a power loss took would be adopted by the next topic of the
	// name (Apache too makes partition.metadata durable before the first
	// append). Its cost is the new partition's: two fsyncs more (the file,
	// the directory) made creating 2,000 partitions take 2.4–4.7 s against
	// 1.5–2.8 s before (alternating runs, load average 5–12).
	return durable.WriteFile(fsys, path, encodeDirID(id))
}

// removeStray moves dir, a directory of the topic whose id was had, aside
// (one rename, made durable) and removes it: from the rename on, no open
// of dir sees its records.
func removeStray(env durable.Env, dir string, had [16]byte) error {
	fsys := env.FS
	stray := strayDir(dir)
	if err := fsys.RemoveAll(stray); err != nil { // a crash's leftover
		return err
	}
	if err := fsys.Rename(dir, stray); err != nil {
		return err
	}
	if err := durable.SyncDir(fsys, filepath.Dir(dir)); err != nil {
		return err
	}
	env.Logger.Warn("removing a partition directory left by a deleted topic of the same name", "dir", dir,
		"its_topic_id", encodeTopicID(had), "moved_to", stray)
	return fsys.RemoveAll(stray)
}
