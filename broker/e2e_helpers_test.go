package broker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"kaas/broker/brokertest"
)

// removeIndexes deletes every .index and .timeindex file of a partition
// directory, as a crash or an operator might.
func removeIndexes(t *testing.T, dataDir, partitionDir string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dataDir, partitionDir))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".index") || strings.HasSuffix(e.Name(), ".timeindex") {
			if err := os.Remove(filepath.Join(dataDir, partitionDir, e.Name())); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no index files in %s", partitionDir)
	}
}

// deleteRecords runs DeleteRecords for one partition through kadm.
func deleteRecords(t *testing.T, adm *kadm.Client, topic string, partition int32, before int64) kadm.DeleteRecordsResponse {
	t.Helper()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: partition, At: before})
	resp, err := adm.DeleteRecords(brokertest.Context(t, 10*time.Second), os)
	if err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	r, ok := resp.Lookup(topic, partition)
	if !ok {
		t.Fatalf("DeleteRecords: no answer for %s-%d", topic, partition)
	}
	return r
}
