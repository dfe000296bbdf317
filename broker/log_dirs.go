package broker

// The log directories DescribeLogDirs and AlterReplicaLogDirs speak of:
// kaas has one, its data directory (the shared volume in a cluster), and a
// broker holds in it the partitions it owns now.

import (
	"path/filepath"
)

// logDir is the data directory as Apache names a log dir: an absolute
// path.
func (b *Broker) logDir() string {
	if abs, err := filepath.Abs(b.cfg.DataDir); err == nil {
		return abs
	}
	return b.cfg.DataDir
}
