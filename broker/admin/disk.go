package admin

import (
	"io/fs"
	"path/filepath"
	"sync"
	"time"
)

// Disk is the data directory's usage, measured every diskEvery (walking a
// directory of many segments is not free, so not on every request).
type Disk struct {
	DataDir   string `json:"data_dir"`
	UsedBytes int64  `json:"used_bytes"`
	Files     int    `json:"files"`
	// FSTotalBytes and FSFreeBytes describe the filesystem holding it
	// (free: available to the broker's user); 0 where unknown.
	FSTotalBytes uint64    `json:"fs_total_bytes"`
	FSFreeBytes  uint64    `json:"fs_free_bytes"`
	MeasuredAt   time.Time `json:"measured_at,omitzero"`
	Error        string    `json:"error,omitempty"`
}

const diskEvery = 15 * time.Second

type diskMeter struct {
	dir  string
	mu   sync.RWMutex
	last Disk
}

func (d *diskMeter) run(stop <-chan struct{}) {
	t := time.NewTicker(diskEvery)
	defer t.Stop()
	for {
		d.measure()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

func (d *diskMeter) measure() {
	out := Disk{DataDir: d.dir, MeasuredAt: time.Now()}
	if abs, err := filepath.Abs(d.dir); err == nil {
		out.DataDir = abs
	}
	err := filepath.WalkDir(d.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed while walking (retention): skip it
		}
		if e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				out.UsedBytes += info.Size()
				out.Files++
			}
		}
		return nil
	})
	if err != nil {
		out.Error = err.Error()
	}
	out.FSTotalBytes, out.FSFreeBytes = fsSpace(d.dir)
	d.mu.Lock()
	d.last = out
	d.mu.Unlock()
}

func (d *diskMeter) get() Disk {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.last
}

// FSSpace is the total and available bytes of the filesystem holding dir
// (0, 0 when unknown), for DescribeLogDirs.
func FSSpace(dir string) (total, free uint64) { return fsSpace(dir) }
