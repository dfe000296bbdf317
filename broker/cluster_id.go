package broker

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"

	"kaas/storage/durable"
	"kaas/storage/topicstore"
)

// loadClusterID reads <data>/__cluster/cluster.id, creating it (a random
// base64 UUID like Kafka's) on first start.
func loadClusterID(dataDir string) (string, error) {
	dir := filepath.Join(dataDir, "__cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "cluster.id")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	u := topicstore.NewUUID()
	id := base64.RawURLEncoding.EncodeToString(u[:])
	return id, durable.WriteFile(path, []byte(id))
}
