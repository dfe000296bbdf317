package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"kaas/broker/brokertest/tools"
)

// TestLibrdkafkaConsumerGroup: two librdkafka consumers (via
// python3-confluent-kafka) share a topic through kaas's group coordinator
// with their own assignor, commit after each record and close; every
// record is read, twice only if its commit never went through (the
// script retries a commit that meets a rebalance, REBALANCE_IN_PROGRESS
// as Apache answers it; before it did, such a commit ended its consumer
// under load), the committed offsets are the ends of the partitions, and
// franz-go sees the same committed offsets.
func TestLibrdkafkaConsumerGroup(t *testing.T) {
	py := tools.Python(t)
	b := startGroupBroker(t, t.TempDir(), nil)
	adm := newAdmin(t, b.Addr())
	createGroupTopic(t, adm, "rdk", 4)
	const perPartition = 25
	for p := int32(0); p < 4; p++ {
		produce(t, b.Addr(), "rdk", p, perPartition)
	}
	cmd := exec.Command(py, "testdata/confluent_group.py", b.Addr(), "rdk", "rdk-group", fmt.Sprint(4*perPartition))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("confluent-kafka script: %v\n%s\n%s", err, out, stderr.String())
	}
	if bytes.Contains(stderr.Bytes(), []byte("PROTOERR")) || bytes.Contains(stderr.Bytes(), []byte("Protocol parse failure")) {
		t.Fatalf("librdkafka reported protocol errors:\n%s", stderr.String())
	}
	if testing.Verbose() && stderr.Len() > 0 {
		t.Logf("librdkafka stderr:\n%s", stderr.String())
	}
	var got map[string]struct {
		Read        []string `json:"read"`
		Assigned    []int32  `json:"assigned"`
		Uncommitted []string `json:"uncommitted"`
		Error       *string  `json:"error"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("script output %q: %v", out, err)
	}
	if len(got) != 2 {
		t.Fatalf("script output %s: want both consumers' results", out)
	}
	times := map[string]int{}
	mayRepeat := map[string]bool{}
	for name, r := range got {
		if r.Error != nil {
			t.Fatalf("%s ended with %s\nlibrdkafka stderr:\n%s", name, *r.Error, stderr.String())
		}
		t.Logf("%s read %d records, assigned %v at the end; %d commits never went through", name, len(r.Read), r.Assigned, len(r.Uncommitted))
		for _, v := range r.Read {
			times[v]++
		}
		for _, v := range r.Uncommitted {
			mayRepeat[v] = true
		}
	}
	if len(times) != 4*perPartition {
		t.Fatalf("read %d distinct records, want %d", len(times), 4*perPartition)
	}
	for v, n := range times {
		if n > 1 && !mayRepeat[v] {
			t.Fatalf("%s read %d times, its commit acknowledged", v, n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, "rdk-group")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 4; p++ {
		if o, ok := offs.Lookup("rdk", p); !ok || o.At != perPartition {
			t.Fatalf("committed offset of rdk-%d: %+v", p, o)
		}
	}
}
