// Package fencelog is the fence file's format: the record a producer id's
// epoch bump appends (on storage/slotlog's framing), how a file of either
// format is read, and which files in the fence directory are the peers'.
// actors/fence is its one writer.
package fencelog

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"kaas/storage/slotlog"
	"kaas/storage/vfs"
)

// Fence files live in <data>/__cluster/producer_fences/, one per broker:
// from-<brokerId>.log. Each has exactly one writer, its broker; the others
// only read it (R-FEN-4, R-FEN-5). A bump appends one record — producer
// id, epoch and the time of the bump — in storage/slotlog's CRC framing
// and is fsynced (with group commit) before it is answered, so a bump
// costs the same whatever the number of producers ever fenced. A reader
// takes the intact records (a torn last one is an append in progress) and
// the highest epoch per producer id; the file is compacted by an atomic
// rewrite, so a reader sees the old file or the new one, both consistent.
// An entry expires transactional.id.expiration.ms after its last bump, as
// the transactional id it fences does when idle (R-FEN-8).
//
// Earlier versions wrote from-<brokerId>.json, {"<pid>": epoch}, rewritten
// whole on every bump: peers' files in that form are still read, and this
// broker's own is moved into the log at start-up.

var fenceFileName = regexp.MustCompile(`^from-(-?\d+)\.(log|json)$`)

// Dir is the fence directory under the data directory.
func Dir(dataDir string) string { return filepath.Join(dataDir, "__cluster", "producer_fences") }

// fileName is broker brokerID's fence file.
func fileName(brokerID int32) string { return fmt.Sprintf("from-%d.log", brokerID) }

// LegacyFileName is the file earlier versions wrote for brokerID.
func LegacyFileName(brokerID int32) string { return fmt.Sprintf("from-%d.json", brokerID) }

// Entry is one producer id's fence: its highest epoch and when it was
// last bumped (unix milliseconds).
type Entry struct {
	Epoch int16
	At    int64
}

const recordVersion = 1

// Encode is the record of pid's fence e.
func Encode(pid int64, e Entry) []byte {
	b := make([]byte, 0, 19)
	b = append(b, recordVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(pid))
	b = binary.BigEndian.AppendUint16(b, uint16(e.Epoch))
	return binary.BigEndian.AppendUint64(b, uint64(e.At))
}

// Decode reads a record Encode wrote.
func Decode(b []byte) (int64, Entry, error) {
	if len(b) != 19 || b[0] != recordVersion {
		return 0, Entry{}, fmt.Errorf("fence record of %d bytes, version %d", len(b), b[0])
	}
	pid := int64(binary.BigEndian.Uint64(b[1:]))
	e := Entry{Epoch: int16(binary.BigEndian.Uint16(b[9:])), At: int64(binary.BigEndian.Uint64(b[11:]))}
	if pid < 0 || e.Epoch < 0 {
		return 0, Entry{}, fmt.Errorf("fence record for producer %d at epoch %d", pid, e.Epoch)
	}
	return pid, e, nil
}

// Merge records e for pid in m if it raises the epoch, keeping the latest
// bump time.
func Merge(m map[int64]Entry, pid int64, e Entry) {
	cur, ok := m[pid]
	if !ok || e.Epoch > cur.Epoch {
		m[pid] = e
	} else if e.Epoch == cur.Epoch && e.At > cur.At {
		cur.At = e.At
		m[pid] = cur
	}
}

// Read reads a fence file of either format. warn reports damage a
// reader skips (a corrupt record in the middle of a peer's log: the intact
// records on both sides still apply, fences only ever raise floors); err
// means the file could not be used at all.
func Read(fsys vfs.FS, path string) (m map[int64]Entry, st fs.FileInfo, warn error, err error) {
	st, err = fsys.Stat(path)
	if err != nil {
		return nil, nil, nil, err
	}
	if filepath.Ext(path) == ".json" {
		m, err = readLegacy(fsys, path, st.ModTime())
		return m, st, nil, err
	}
	scan, err := slotlog.Read(fsys, path)
	if err != nil {
		return nil, st, nil, err
	}
	frames := scan.Frames
	if scan.Corrupt {
		warn = fmt.Errorf("%s: %s", path, scan.Reason)
		frames = scan.Salvaged
	}
	m = make(map[int64]Entry, len(frames))
	for _, f := range frames {
		pid, e, derr := Decode(f.Payload)
		if derr != nil {
			warn = fmt.Errorf("%s at byte %d: %w", path, f.At, derr)
			continue
		}
		Merge(m, pid, e)
	}
	return m, st, warn, nil
}

// readLegacy reads a {"<pid>": epoch} file; its entries count as bumped
// when the file was last written.
func readLegacy(fsys vfs.FS, path string, modified time.Time) (map[int64]Entry, error) {
	raw, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return nil, err
	}
	var m map[string]int64
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	out := make(map[int64]Entry, len(m))
	for k, v := range m {
		pid, err := strconv.ParseInt(k, 10, 64)
		if err != nil || pid < 0 || v < 0 || v > 32767 {
			return nil, fmt.Errorf("%s: bad entry %q: %d", path, k, v)
		}
		out[pid] = Entry{Epoch: int16(v), At: modified.UnixMilli()}
	}
	return out, nil
}

// PeerFiles lists the fence files of other brokers (never temp files),
// preferring a broker's log over a legacy file of the same broker.
func PeerFiles(fsys vfs.FS, dir string, self int32) ([]string, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	logs := map[string]bool{}
	for _, e := range entries {
		if m := fenceFileName.FindStringSubmatch(e.Name()); m != nil && m[2] == "log" {
			logs[m[1]] = true
		}
	}
	for _, e := range entries {
		m := fenceFileName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() || (m[2] == "json" && logs[m[1]]) {
			continue
		}
		if id, err := strconv.ParseInt(m[1], 10, 32); err == nil && int32(id) == self {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out, nil
}

// FileName is the name of broker brokerID's fence file in the fence
// directory (<data>/__cluster/producer_fences).
func FileName(brokerID int32) string { return fileName(brokerID) }

// ReadFile reads a fence file (either format) as producer id → highest
// epoch, skipping a torn last record (tests, tools).
func ReadFile(fsys vfs.FS, path string) (map[int64]int16, error) {
	m, _, warn, err := Read(fsys, path)
	if err != nil {
		return nil, err
	}
	if warn != nil {
		return nil, warn
	}
	out := make(map[int64]int16, len(m))
	for pid, e := range m {
		out[pid] = e.Epoch
	}
	return out, nil
}
