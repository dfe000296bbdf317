package broker_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"testing"

	"kaas/broker/brokertest"
	"kaas/broker/brokertest/tools"
	"kaas/model/slots"
)

// TestLibrdkafkaVersions: python3-confluent-kafka (librdkafka 1.7)
// produces and consumes as a group at the versions it negotiates, reads
// back as a Kafka 0.9 client (Fetch v1, ListOffsets v0, message format
// v0), lists topics and describes configs with its AdminClient, and reads
// the group's commit from __consumer_offsets decoding Apache's key and
// value — with no protocol error anywhere.
func TestLibrdkafkaVersions(t *testing.T) {
	py := tools.Python(t)
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "rdk-versions", 1, nil)
	const group, n = "rdk-versions-group", 30
	cmd := exec.Command(py, "testdata/confluent_versions.py", b.Addr(), "rdk-versions", group, fmt.Sprint(slots.Of(group)), fmt.Sprint(n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("confluent-kafka script: %v\n%s\n%s", err, out, stderr.String())
	}
	if bytes.Contains(stderr.Bytes(), []byte("PROTOERR")) || bytes.Contains(stderr.Bytes(), []byte("Protocol parse failure")) {
		t.Fatalf("librdkafka reported protocol errors:\n%s", stderr.String())
	}
	var got struct {
		Errors        []string         `json:"errors"`
		Undelivered   int              `json:"undelivered"`
		GroupRead     int              `json:"group_read"`
		OldRead       int              `json:"old_read"`
		Topics        []string         `json:"topics"`
		CleanupPolicy string           `json:"cleanup_policy"`
		Commits       map[string]int64 `json:"commits"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("script output %q: %v", out, err)
	}
	if got.Undelivered != 0 || got.GroupRead != n || got.OldRead != n || len(got.Errors) != 0 {
		t.Fatalf("undelivered %d, group read %d, old client read %d (want %d), errors %v", got.Undelivered, got.GroupRead, got.OldRead, n, got.Errors)
	}
	if !slices.Contains(got.Topics, "rdk-versions") || !slices.Contains(got.Topics, "__consumer_offsets") || got.CleanupPolicy != "delete" {
		t.Fatalf("admin: topics %v, cleanup.policy %q", got.Topics, got.CleanupPolicy)
	}
	if c := got.Commits[group+"/rdk-versions/0"]; c != n {
		t.Fatalf("__consumer_offsets as read: %v, want %s/rdk-versions/0 at %d", got.Commits, group, n)
	}
}
