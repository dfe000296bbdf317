package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"

	"kaas/broker/brokertest/tools"
)

// librdkafka's transactional producer (via confluent-kafka) commits and
// aborts against kaas, and its read_committed consumer sees only the
// committed transactions.
func TestLibrdkafkaTransactions(t *testing.T) {
	py := tools.Python(t)
	b := startTxnBroker(t, t.TempDir())
	createTopic(t, b, "rdkafka-txn", 2)
	cmd := exec.Command(py, "testdata/confluent_txn.py", b.Addr(), "rdkafka-txn")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("confluent-kafka script: %v\n%s\n%s", err, out, stderr.String())
	}
	// librdkafka logs protocol violations and carries on; they are bugs.
	if bytes.Contains(stderr.Bytes(), []byte("PROTOERR")) || bytes.Contains(stderr.Bytes(), []byte("Protocol parse failure")) {
		t.Fatalf("librdkafka reported protocol errors:\n%s", stderr.String())
	}
	var got struct {
		ReadCommitted   []string `json:"read_committed"`
		ReadUncommitted []string `json:"read_uncommitted"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("script output %q: %v", out, err)
	}
	want := "[c1-0 c1-1 c1-2 c1-3 c1-4 c2-0 c2-1 c2-2]"
	if fmt.Sprint(got.ReadCommitted) != want {
		t.Fatalf("read_committed saw %v, want %s", got.ReadCommitted, want)
	}
	if len(got.ReadUncommitted) != 12 {
		t.Fatalf("read_uncommitted saw %d records (%v), want all 12 including the aborted ones", len(got.ReadUncommitted), got.ReadUncommitted)
	}
}
