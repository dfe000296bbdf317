// Package sharestate is where share groups' share-partition state is kept
// (KIP-932; Apache keeps it in __share_group_state through its share
// coordinator): a slot log with one record per change of a
// share-partition holding its whole window — the start offset (SPSO) and
// the runs of delivery states and counts. The last record of a
// share-partition is its state; older ones are dropped by compaction (an
// atomic rewrite of the latest ones).
//
// A single broker keeps every share-partition in one log,
// <data>/__cluster/share_state/share.log (Open). A cluster broker keeps
// each partition's share-partitions with the partition, in
// <data>/<topic>-<partition>/share_state.g<N>.log, N the generation of
// the partition's owner (OpenPartition): a takeover seals the previous
// owner's file as coordinator slots are (slotlog.Adopt), so whatever a
// deposed owner still writes lands where no reader looks.
//
// The log's fsync, failure and corruption policies are slotlog's: a
// failed write or fsync is final (the store goes offline and refuses
// everything after), a torn tail is cut, damage in durable data refuses
// the start (or is quarantined with --skip-corrupt).
package sharestate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"kaas/storage/durable"
	"kaas/storage/slotlog"
	"kaas/storage/vfs"
)

// Key names one share-partition.
type Key struct {
	Group     string
	Topic     [16]byte
	Partition int32
}

// Run is consecutive offsets with one state and delivery count.
type Run struct {
	First, Last int64
	State       int8
	Deliveries  int16
}

// Record is a share-partition's state, or its deletion
// (DeleteShareGroupOffsets).
type Record struct {
	Key
	Deleted bool
	Start   int64
	Runs    []Run
}

const (
	version = 1
	// compactAt: a log this large and four times what it holds live is
	// rewritten.
	compactAt = 1 << 20
)

// Dir is where the share state lives under the data directory.
func Dir(dataDir string) string { return filepath.Join(dataDir, "__cluster", "share_state") }

// Store is the open share state log. Not safe for concurrent use: the
// share coordinator actor owns it.
type Store struct {
	log    *slotlog.Log
	latest map[Key][]byte // each share-partition's last record, encoded
	live   int
}

// Open opens (or creates) a single broker's log under dir and returns
// every share-partition's last state.
func Open(env durable.Env, dir string) (*Store, map[Key]Record, error) {
	env = env.Or()
	if err := durable.MkdirAll(env.FS, dir); err != nil {
		return nil, nil, err
	}
	return openAt(env, filepath.Join(dir, "share.log"))
}

// partitionBase is the name of a partition's share state log in its
// directory (before its generation).
const partitionBase = "share_state"

// OpenPartition takes a partition's share state log over for owner (its
// generation and lease gate, the partition's): the previous owner's file
// is sealed and copied to owner's generation (slotlog.Adopt), then opened.
// It returns the share-partitions it held.
func OpenPartition(env durable.Env, partitionDir string, owner slotlog.Owner) (*Store, map[Key]Record, error) {
	env = env.Or()
	if err := durable.MkdirAll(env.FS, partitionDir); err != nil {
		return nil, nil, err
	}
	path, err := slotlog.Adopt(env, partitionDir, partitionBase, owner)
	if err != nil {
		return nil, nil, err
	}
	return openAt(env, path)
}

// HasPartition says whether a partition's directory holds a share state
// log (of any generation).
func HasPartition(fsys vfs.FS, partitionDir string) (bool, error) {
	ents, err := fsys.ReadDir(partitionDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	for _, e := range ents {
		if base, _, ok := slotlog.ParseGeneration(e.Name()); ok && base == partitionBase {
			return true, nil
		}
	}
	return false, nil
}

func openAt(env durable.Env, path string) (*Store, map[Key]Record, error) {
	s := &Store{latest: map[Key][]byte{}}
	out := map[Key]Record{}
	l, err := slotlog.Open(env, "share_state", path, func(f slotlog.Frame) error {
		r, err := Decode(f.Payload)
		if err != nil {
			return err
		}
		if r.Deleted {
			delete(out, r.Key)
			s.drop(r.Key)
			return nil
		}
		out[r.Key] = r
		s.put(r.Key, append([]byte(nil), f.Payload...))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	l.Preallocate() // acknowledgements wait for its fsyncs
	s.log = l
	return s, out, nil
}

func (s *Store) put(k Key, p []byte) {
	s.live += len(p) - len(s.latest[k])
	s.latest[k] = p
}

func (s *Store) drop(k Key) {
	s.live -= len(s.latest[k])
	delete(s.latest, k)
}

// Put appends a share-partition's state (or, Deleted, its deletion: a
// compaction then leaves it out); it is durable once a later Sync
// succeeds.
func (s *Store) Put(r Record) error {
	p := Encode(r)
	if err := s.log.Append(p); err != nil {
		return err
	}
	if r.Deleted {
		s.drop(r.Key)
	} else {
		s.put(r.Key, p)
	}
	return nil
}

// Sync makes every Put durable, then compacts the log if it is mostly
// superseded records. The caller must have no fsync of the log running
// elsewhere (slotlog.Group.Release first).
func (s *Store) Sync() error {
	if err := s.log.Sync(); err != nil {
		return err
	}
	if !s.NeedsCompaction() {
		return nil
	}
	return s.Compact()
}

// Log is the store's slot log, for group commit off the actor
// (slotlog.Group: Wait, Flush, Done).
func (s *Store) Log() *slotlog.Log { return s.log }

// NeedsCompaction says the log is large and mostly superseded records
// (slotlog.Compactable).
func (s *Store) NeedsCompaction() bool {
	return s.log.Size() >= compactAt && s.log.Size() >= 4*int64(s.live)
}

// Compact rewrites the log with each share-partition's last record; only
// when everything appended is synced and no fsync runs
// (slotlog.Compactable).
func (s *Store) Compact() error {
	return s.log.Rewrite(func(yield func([]byte) bool) {
		for _, p := range s.latest {
			if !yield(p) {
				return
			}
		}
	})
}

// Failed is the write or fsync error that took the store offline, or nil.
func (s *Store) Failed() error { return s.log.Failed() }

// Close closes the log (after a Sync by the caller).
func (s *Store) Close() error { return s.log.Close() }

// Encode is a record's payload:
//
//	version u8 | flags u8 (1: deleted) | group len u16 | group | topic [16] | partition i32 |
//	start i64 | runs u32 | runs × (first i64 | last i64 | state i8 | deliveries i16)
func Encode(r Record) []byte {
	b := make([]byte, 0, 2+2+len(r.Group)+16+4+8+4+len(r.Runs)*19)
	var flags byte
	if r.Deleted {
		flags = 1
	}
	b = append(b, version, flags)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Group)))
	b = append(b, r.Group...)
	b = append(b, r.Topic[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Partition))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Start))
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Runs)))
	for _, run := range r.Runs {
		b = binary.BigEndian.AppendUint64(b, uint64(run.First))
		b = binary.BigEndian.AppendUint64(b, uint64(run.Last))
		b = append(b, byte(run.State))
		b = binary.BigEndian.AppendUint16(b, uint16(run.Deliveries))
	}
	return b
}

var errShort = errors.New("share state record too short")

// Decode parses a payload.
func Decode(p []byte) (Record, error) {
	var r Record
	if len(p) < 4 || p[0] != version || p[1]&^1 != 0 {
		return r, fmt.Errorf("share state record of unknown version or flags")
	}
	r.Deleted = p[1]&1 != 0
	n := int(binary.BigEndian.Uint16(p[2:]))
	p = p[4:]
	if len(p) < n+16+4+8+4 {
		return r, errShort
	}
	r.Group = string(p[:n])
	p = p[n:]
	copy(r.Topic[:], p)
	r.Partition = int32(binary.BigEndian.Uint32(p[16:]))
	r.Start = int64(binary.BigEndian.Uint64(p[20:]))
	runs := int(binary.BigEndian.Uint32(p[28:]))
	p = p[32:]
	if len(p) != runs*19 {
		return r, errShort
	}
	r.Runs = make([]Run, runs)
	for i := range r.Runs {
		q := p[i*19:]
		r.Runs[i] = Run{First: int64(binary.BigEndian.Uint64(q)), Last: int64(binary.BigEndian.Uint64(q[8:])),
			State: int8(q[16]), Deliveries: int16(binary.BigEndian.Uint16(q[17:]))}
	}
	return r, nil
}
