package broker

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

	"kaas/storage/durable"
	"kaas/storage/topicstore"
	"kaas/storage/vfs"
)

// loadClusterID reads <data>/__cluster/cluster.id, creating it (a random
// base64 UUID like Kafka's) on first start. One that does not decode is
// corruption (with --skip-corrupt it is moved aside and a new id made).
func loadClusterID(env durable.Env) (string, error) {
	dir := filepath.Join(env.DataDir, "__cluster")
	if err := durable.MkdirAll(env.FS, dir); err != nil {
		return "", err
	}
	durable.RemoveTemps(env.FS, dir)
	path := filepath.Join(dir, "cluster.id")
	b, err := vfs.ReadFile(env.FS, path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if raw, derr := base64.RawURLEncoding.DecodeString(id); derr == nil && len(raw) == 16 {
			return id, nil
		}
		if err := env.Corrupt("cluster id", path, 0, "not a base64 cluster id"); err != nil {
			return "", err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	u := topicstore.NewUUID()
	id := base64.RawURLEncoding.EncodeToString(u[:])
	return id, durable.WriteFile(env.FS, path, []byte(id))
}
