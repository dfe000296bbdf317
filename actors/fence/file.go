package fence

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// Fence files live in <data>/__cluster/producer_fences/, one per broker:
// from-<brokerId>.json = {"<pid>": epoch}. Each has exactly one writer, its
// broker; the others only read it (R-FEN-4, R-FEN-5).

var fenceFileName = regexp.MustCompile(`^from-(-?\d+)\.json$`)

func fenceDir(dataDir string) string { return filepath.Join(dataDir, "__cluster", "producer_fences") }

func fileName(brokerID int32) string { return fmt.Sprintf("from-%d.json", brokerID) }

// parseFenceFile reads one fence file. A partial or malformed file is an
// error the caller logs and skips.
func parseFenceFile(fsys vfs.FS, path string) (map[int64]int16, os.FileInfo, error) {
	st, err := fsys.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	raw, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return nil, nil, err
	}
	var m map[string]int64
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, st, fmt.Errorf("parsing %s: %w", path, err)
	}
	out := make(map[int64]int16, len(m))
	for k, v := range m {
		pid, err := strconv.ParseInt(k, 10, 64)
		if err != nil || pid < 0 || v < 0 || v > 32767 {
			return nil, st, fmt.Errorf("%s: bad entry %q: %d", path, k, v)
		}
		out[pid] = int16(v)
	}
	return out, st, nil
}

// writeFenceFile replaces the file atomically (tmp + fsync + rename).
func writeFenceFile(fsys vfs.FS, path string, m map[int64]int16) error {
	out := make(map[string]int16, len(m))
	for pid, e := range m {
		out[strconv.FormatInt(pid, 10)] = e
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return durable.WriteFile(fsys, path, b)
}

// peerFiles lists the fence files of other brokers (never temp files).
func peerFiles(fsys vfs.FS, dir string, self int32) ([]string, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		m := fenceFileName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			continue
		}
		if id, err := strconv.ParseInt(m[1], 10, 32); err == nil && int32(id) == self {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out, nil
}
