// Package slotlog is the one durable substrate for state kept as an
// append-only log of records — the consumer offsets slots, the
// transaction coordinator slots and the fence file: CRC-framed records,
// appends made durable by a Sync the caller shares among every append
// waiting at that moment (group commit), a write or fsync failure that is
// final for the file, recovery that cuts a torn tail but never cuts or
// deletes data that was durable, and compaction by an atomic rewrite.
//
// A frame is
//
//	length u32 | crc32c(body) u32 | body
//	body = 2 | synced u64 | payload
//
// where synced is how many bytes of the file a finished fsync covered when
// the frame was written. That is what tells a crash's torn tail from
// corruption: after a bad frame, an intact later frame whose synced mark
// lies past the bad one proves the bad bytes had been fsynced (and maybe
// acknowledged), so recovery must not cut them. (Files written before the
// mark existed hold body = 1 | payload frames: the payload starts with that
// 1; they are read as they are, and any damage in them is a torn tail
// unless an intact newer frame says otherwise.)
//
// A log whose owner calls Preallocate (the stores whose fsyncs an
// acknowledgement waits for) is extended ahead of its records with zeros,
// preallocChunk bytes at a time, in the same write as the record that
// needs the room:
// an fdatasync that only overwrites blocks already in the file has no
// size or extent to journal, which costs this process ~25% less CPU per
// fsync on the project's VM (every transaction fsyncs its coordinator
// slot twice). A zero-filled tail is therefore a normal end of file:
// recovery keeps it as room for the next records, and a torn record in
// front of it is cut as any torn tail.
package slotlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

const (
	headerLen    = 8 // length + crc
	markedLen    = 1 + 8
	versionMark  = 2
	versionPlain = 1 // frames without the synced mark: body is the payload
	// MaxPayload bounds one record.
	MaxPayload = 64 << 20
	// preallocChunk is how far past its last record the file is extended
	// with zeros when a record does not fit in the room left.
	preallocChunk = 64 << 10
)

// maxScratch bounds the frame buffer a log keeps between appends.
const maxScratch = 4 << 10

// zeroChunk is what preallocated room is written with.
var zeroChunk [preallocChunk]byte

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// AppendFrame encodes one frame holding payload, written when synced bytes
// of its file were durable.
func AppendFrame(dst []byte, synced int64, payload []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(markedLen+len(payload)))
	dst = append(dst, 0, 0, 0, 0)
	dst = append(dst, versionMark)
	dst = binary.BigEndian.AppendUint64(dst, uint64(synced))
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+headerLen:], crcTable))
	return dst
}

// frame is one intact frame found in a file.
type frame struct {
	size    int64
	synced  int64
	payload []byte
}

// parse decodes the frame at the start of src, or reports ok=false.
func parse(src []byte) (f frame, ok bool) {
	if len(src) < headerLen {
		return f, false
	}
	n := binary.BigEndian.Uint32(src)
	if n < 1 || n > MaxPayload+markedLen || uint64(len(src)-headerLen) < uint64(n) {
		return f, false
	}
	body := src[headerLen : headerLen+int(n)]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(src[4:]) {
		return f, false
	}
	f.size = headerLen + int64(n)
	switch body[0] {
	case versionMark:
		if len(body) < markedLen {
			return f, false
		}
		f.synced = int64(binary.BigEndian.Uint64(body[1:]))
		f.payload = body[markedLen:]
	case versionPlain:
		f.payload = body
	default:
		return f, false
	}
	return f, true
}

// Scan is what a file holds: its intact frames up to the first bad byte
// (Frames), and if there is damage, where and whether it is a torn tail.
type Scan struct {
	Frames []Frame
	// End is where the intact prefix ends (the file's size when it is
	// whole).
	End int64
	// Corrupt is set when bytes after End were durable: then Salvaged
	// holds every intact frame of the file, before and after the damage.
	Corrupt  bool
	Reason   string
	Salvaged []Frame
	// Sealed: the intact prefix ends with a seal (a clean close).
	Sealed bool
}

// Frame is one record read from a file.
type Frame struct {
	At      int64 // byte offset of the frame in the file
	Payload []byte
}

// ScanBytes reads a whole file's content.
func ScanBytes(data []byte) Scan {
	var s Scan
	off := int64(0)
	for off < int64(len(data)) {
		f, ok := parse(data[off:])
		if !ok {
			break
		}
		s.Sealed = len(f.payload) == 0
		if !s.Sealed {
			s.Frames = append(s.Frames, Frame{At: off, Payload: f.payload})
		}
		off += f.size
	}
	s.End = off
	if off == int64(len(data)) || allZero(data[off:]) {
		// Whole, or ending in the zeros preallocated for later records.
		return s
	}
	// Look past the damage for intact frames: one that was written after
	// an fsync covering the damaged bytes proves they were durable.
	s.Salvaged = append([]Frame(nil), s.Frames...)
	for p := off + 1; p < int64(len(data)); {
		f, ok := parse(data[p:])
		if !ok {
			p++
			continue
		}
		if f.synced > off && !s.Corrupt {
			s.Corrupt = true
			s.Reason = fmt.Sprintf("an intact record at byte %d was written after byte %d had been fsynced", p, f.synced)
		}
		if len(f.payload) > 0 {
			s.Salvaged = append(s.Salvaged, Frame{At: p, Payload: f.payload})
		}
		p += f.size
	}
	if !s.Corrupt {
		s.Salvaged = nil
	}
	return s
}

// Log is one open slot log. Not safe for concurrent use: one actor owns
// it.
type Log struct {
	env    durable.Env
	store  string
	path   string
	f      vfs.File
	size   int64
	synced int64
	// alloc is the file's length on disk: size plus the preallocated
	// zeros after the last record.
	alloc int64
	// chunk is how far Append extends the file past a record that does
	// not fit (0: exactly to the record's end).
	chunk  int64
	failed error
	// scratch is the last Append's frame buffer, for the next one.
	scratch []byte
	// salvaged: Open quarantined a damaged file and kept its intact
	// records; some records may be missing.
	salvaged bool
	// sealed: the file ends with a seal frame (nothing appended since).
	sealed bool
}

// ErrOffline is returned by every write to a log whose disk failed.
var ErrOffline = errors.New("offline after a disk failure")

// Open opens path, creating it (and fsyncing its directory) if missing,
// and calls replay with every record in order. Recovery follows the
// corruption policy: a torn tail is cut; damage in data that was durable
// fails the open with a *durable.CorruptError naming the file and offset,
// or with --skip-corrupt the file is moved to the quarantine directory and
// a new one is written with every intact record (replay then sees those).
// A record that passes its CRC but that replay cannot decode was written
// by a newer version or a bug: the open fails with replay's error, naming
// the record's offset. store names the kind of log in logs and metrics.
func Open(env durable.Env, store, path string, replay func(Frame) error) (*Log, error) {
	env = env.Or()
	l := &Log{env: env, store: store, path: path}
	data, err := vfs.ReadFile(env.FS, path)
	created := false
	switch {
	case errors.Is(err, fs.ErrNotExist):
		created = true
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	scan := ScanBytes(data)
	frames := scan.Frames
	if scan.Corrupt {
		if err := env.Corrupt(store, path, scan.End, scan.Reason); err != nil {
			return nil, err
		}
		// Go on with what is intact, in a fresh file (the damaged one is
		// in quarantine).
		var buf []byte
		for _, fr := range scan.Salvaged {
			buf = AppendFrame(buf, int64(len(buf)), fr.Payload)
		}
		if err := durable.WriteFile(env.FS, path, buf); err != nil {
			return nil, err
		}
		scan = ScanBytes(buf)
		data, frames, created = buf, scan.Frames, false
		l.salvaged = true
	}
	for _, fr := range frames {
		if err := replay(fr); err != nil {
			return nil, &durable.CorruptError{Path: path, Offset: fr.At, Reason: fmt.Sprintf("an intact record does not decode (written by a newer version?): %v", err)}
		}
	}
	l.f, err = env.FS.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if created {
		if err := durable.SyncDir(env.FS, filepath.Dir(path)); err != nil {
			l.f.Close()
			return nil, err
		}
	}
	l.alloc = int64(len(data))
	if scan.End < int64(len(data)) && !allZero(data[scan.End:]) {
		l.alloc = scan.End
		env.Logger.Warn("cutting the torn tail of a log (never acknowledged)", "store", store, "file", path,
			"at", scan.End, "dropped_bytes", int64(len(data))-scan.End)
		if err := l.f.Truncate(scan.End); err != nil {
			l.f.Close()
			return nil, fmt.Errorf("truncating %s: %w", path, err)
		}
	}
	l.size = scan.End
	// What was read may have been only in the page cache (a process
	// crash): fsync before frames claim it is durable.
	if len(data) > 0 {
		if err := l.f.Sync(); err != nil {
			l.f.Close()
			return nil, err
		}
	}
	l.synced = l.size
	l.sealed = scan.Sealed
	return l, nil
}

// Salvaged reports that Open moved a damaged file to quarantine and went
// on with its intact records (--skip-corrupt): some may be missing.
func (l *Log) Salvaged() bool { return l.salvaged }

// Path is the file's path.
func (l *Log) Path() string { return l.path }

// Size is the file's length in bytes.
func (l *Log) Size() int64 { return l.size }

// Failed is the write or fsync error that took the log offline, or nil.
func (l *Log) Failed() error { return l.failed }

func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
		l.env.Failed(l.store, err, "file", l.path)
	}
	return l.failed
}

// Append writes one record; it is durable once a later Sync succeeds. A
// failed write is final: the log refuses everything after it.
func (l *Log) Append(payload []byte) error {
	if l.failed != nil {
		return ErrOffline
	}
	if len(payload) == 0 {
		return errors.New("slotlog: an empty record (the seal's form)")
	}
	buf := AppendFrame(l.scratch[:0], l.synced, payload)
	if cap(buf) <= maxScratch {
		// Reused by the next Append (WriteAt keeps nothing): a
		// transaction's coordinator records are a few hundred bytes.
		l.scratch = buf[:0]
	}
	if end := l.size + int64(len(buf)); end > l.alloc && l.chunk > 0 {
		// No room: extend the file with zeros in the same write.
		alloc := end + l.chunk
		buf = append(buf, zeroChunk[:alloc-end]...)
		if _, err := l.f.WriteAt(buf, l.size); err != nil {
			return l.fail(fmt.Errorf("writing %s: %w", l.path, err))
		}
		l.alloc = alloc
		l.size = end
		l.sealed = false
		return nil
	}
	if _, err := l.f.WriteAt(buf, l.size); err != nil {
		return l.fail(fmt.Errorf("writing %s: %w", l.path, err))
	}
	l.size += int64(len(buf))
	l.alloc = max(l.alloc, l.size)
	l.sealed = false
	return nil
}

// Preallocate makes Append extend the file with zeros ahead of its
// records, so that most fsyncs overwrite blocks already in the file. A
// file another process reads while it grows (the fence file) keeps its
// exact end instead.
func (l *Log) Preallocate() { l.chunk = preallocChunk }

// Sync makes every appended record durable. A failed fsync is final: the
// page cache may have dropped what it held, so nothing the log held since
// the last good fsync may be acknowledged, now or after a retry.
func (l *Log) Sync() error {
	j := l.prepareSync()
	if j == nil {
		if l.failed != nil {
			return ErrOffline
		}
		return nil
	}
	j.run()
	return l.finishSync(j)
}

// syncJob is one fsync of a log, run off its owner (Group): it covers the
// bytes appended before it started (upTo); appends made while it runs
// wait for the next one.
type syncJob struct {
	l    *Log
	f    vfs.File
	upTo int64
	err  error
	done chan struct{} // closed once run returns
	off  bool          // run off the owner (Group.start), not inline
}

// prepareSync captures what is appended so far, or returns nil when the
// log is offline or nothing was appended since the last fsync.
func (l *Log) prepareSync() *syncJob {
	if l.failed != nil || l.synced == l.size {
		return nil
	}
	return &syncJob{l: l, f: l.f, upTo: l.size, done: make(chan struct{})}
}

// run is the fsync itself: the only part that may run on another
// goroutine while the owner appends (an fsync and a write at the end of
// the same file do not conflict).
func (j *syncJob) run() {
	j.err = j.f.Sync()
	close(j.done)
}

// finishSync records what a finished job made durable, or takes the log
// offline with its error. Only the owner calls it.
func (l *Log) finishSync(j *syncJob) error {
	if l.failed != nil {
		return ErrOffline
	}
	if j.err != nil {
		return l.fail(fmt.Errorf("fsync of %s: %w", l.path, j.err))
	}
	l.synced = max(l.synced, j.upTo)
	return nil
}

// Rewrite replaces the file with the given records (compaction): written
// to a temporary file, fsynced and renamed over the log, so a crash leaves
// one or the other. Call it only when everything appended is synced. A
// failure is final too (the rename may have happened).
func (l *Log) Rewrite(payloads func(yield func([]byte) bool)) error {
	if l.failed != nil {
		return ErrOffline
	}
	// The new file is fsynced whole before it replaces the log, so every
	// frame may vouch for the bytes before it: damage in the middle of a
	// compacted log is then corruption, not a torn tail to cut.
	var buf []byte
	for p := range payloads {
		buf = AppendFrame(buf, int64(len(buf)), p)
	}
	if err := durable.WriteFile(l.env.FS, l.path, buf); err != nil {
		return l.fail(fmt.Errorf("compacting %s: %w", l.path, err))
	}
	f, err := l.env.FS.OpenFile(l.path, os.O_RDWR, 0o644)
	if err != nil {
		return l.fail(fmt.Errorf("reopening %s after compaction: %w", l.path, err))
	}
	l.f.Close()
	l.f, l.size, l.synced, l.sealed = f, int64(len(buf)), int64(len(buf)), false
	l.alloc = l.size
	return nil
}

// Close closes the file (appends are synced by the caller first). A log
// whose appends are all durable is sealed first: an empty frame vouching
// for every byte before it, so damage found in the last record at the
// next start is corruption to refuse, not a torn tail to cut (a clean
// shutdown leaves no torn tail).
func (l *Log) Close() error {
	if l.f == nil {
		return nil
	}
	if l.failed == nil && !l.sealed && l.size > 0 && l.synced == l.size {
		l.seal()
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// seal appends and fsyncs the seal frame. A failure loses nothing (every
// record was durable before it): it is logged, and a torn seal is cut as a
// torn tail at the next start.
func (l *Log) seal() {
	buf := AppendFrame(nil, l.size, nil)
	_, err := l.f.WriteAt(buf, l.size)
	if err == nil {
		err = l.f.Sync()
	}
	if err != nil {
		l.env.Logger.Warn("sealing a log at close failed; its last record will not be checked at the next start", "store", l.store, "file", l.path, "err", err)
		return
	}
	l.size += int64(len(buf))
	l.synced, l.sealed = l.size, true
}

// Read returns the intact records of a file another process may be
// appending to (a peer's fence file): it never writes, and bytes after the
// intact prefix are left alone (a torn end is an append in progress).
func Read(fsys vfs.FS, path string) (Scan, error) {
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return Scan{}, err
	}
	return ScanBytes(data), nil
}
