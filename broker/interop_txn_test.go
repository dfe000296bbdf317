package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest/tools"
)

// librdkafka's transactional producer (via confluent-kafka) commits and
// aborts against kaas, and its read_committed consumer sees only the
// committed transactions. librdkafka runs transaction version 1 while a
// franz-go producer runs version 2 on the same broker at the same time
// (R-TV2-1).
func TestLibrdkafkaTransactions(t *testing.T) {
	py := tools.Python(t)
	b := startTxnBroker(t, t.TempDir())
	createTopic(t, b, "rdkafka-txn", 2)
	createTopic(t, b, "beside-rdkafka", 2)
	cmd := exec.Command(py, "testdata/confluent_txn.py", b.Addr(), "rdkafka-txn")
	var stderr, stdout bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tv2 := runTxns(t, testCtx(t), txnProducer(t, b, "beside-rdkafka", "beside-rdkafka"), "tv2", 5)
	err := cmd.Wait()
	out := stdout.Bytes()
	if err != nil {
		t.Fatalf("confluent-kafka script: %v\n%s\n%s", err, out, stderr.String())
	}
	var classic float64
	for v := range 5 {
		classic += requestsAt(b, "EndTxn", v)
	}
	if v5 := requestsAt(b, "EndTxn", 5); v5 != 5 || classic == 0 {
		t.Errorf("EndTxn v5 %v times (franz-go's 5 ends), below v5 %v times (librdkafka's)", v5, classic)
	}
	if got := consumeAll(t, b, "beside-rdkafka", kgo.ReadCommitted()); len(got) != len(tv2) {
		t.Errorf("franz-go's TV2 transactions beside librdkafka: read_committed %v, want %v", got, tv2)
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
