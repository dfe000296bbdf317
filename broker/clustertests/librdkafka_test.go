package clustertests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"kaas/broker/brokertest"
	"kaas/broker/brokertest/tools"
	"kaas/model/slots"
	"kaas/state/ownership"
)

// librdkafka (python3-confluent-kafka) across three brokers: an
// idempotent producer writes to partitions led by every broker, a
// consumer group of two librdkafka consumers reads each record exactly
// once and commits to a coordinator that leads none of the partitions it
// is asked about, and a librdkafka transaction spans partitions led by
// two brokers with its coordinator on the third (markers sent between
// brokers), read back with read_committed. The bootstrap list is one
// broker: librdkafka finds the others from Metadata.
func TestClusterLibrdkafka(t *testing.T) {
	py := tools.Python(t)
	c := newCluster(t, 3)
	bootstrap := c.brokers[1].addr

	const topic, parts, n = "rdk-spread", 6, 300
	c.createTopic(topic, parts)
	leaders := c.leaders(topic, parts)
	by := map[int32]bool{}
	for _, le := range leaders {
		by[le[0]] = true
	}
	if len(by) != 3 {
		t.Fatalf("partitions led by %v; want all three brokers", leaders)
	}
	var prod struct {
		Delivered   int      `json:"delivered"`
		Undelivered int      `json:"undelivered"`
		Errors      []string `json:"errors"`
	}
	runScript(t, py, &prod, "../testdata/confluent_produce.py", bootstrap, topic, fmt.Sprint(parts), fmt.Sprint(n))
	if prod.Delivered != n || prod.Undelivered != 0 || len(prod.Errors) != 0 {
		t.Fatalf("librdkafka producer: %+v", prod)
	}

	var group map[string]struct {
		Read []string `json:"read"`
	}
	runScript(t, py, &group, "../testdata/confluent_group.py", bootstrap, topic, "rdk-cluster-group", fmt.Sprint(n))
	var all []string
	for _, r := range group {
		all = append(all, r.Read...)
	}
	sort.Strings(all)
	if len(all) != n {
		t.Fatalf("the librdkafka group read %d records, want %d", len(all), n)
	}
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("%s read twice", all[i])
		}
	}
	offs, err := c.admin().FetchOffsets(brokertest.Context(t, 10*time.Second), "rdk-cluster-group")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < parts; p++ {
		if o, ok := offs.Lookup(topic, p); !ok || o.At != n/parts {
			t.Fatalf("committed offset of %s-%d: %+v", topic, p, o)
		}
	}

	// A topic whose two partitions and the transaction's coordinator
	// (confluent_txn.py's transactional.id) fall on three different
	// brokers: rendezvous hashing is deterministic, so pick the name.
	members := []int32{1, 2, 3}
	coordinator := ownership.Owner(ownership.TxnSlotUnit(slots.Of("librdkafka-txn")), members)
	txnTopic := ""
	for i := 0; txnTopic == ""; i++ {
		name := fmt.Sprintf("rdk-txn-%d", i)
		l0 := ownership.Owner(ownership.PartitionUnit(name, 0), members)
		l1 := ownership.Owner(ownership.PartitionUnit(name, 1), members)
		if l0 != l1 && l0 != coordinator && l1 != coordinator {
			txnTopic = name
		}
	}
	c.createTopic(txnTopic, 2)
	tl := c.leaders(txnTopic, 2)
	t.Logf("transaction: coordinator %d, partitions led by %d and %d", coordinator, tl[0][0], tl[1][0])
	var txn struct {
		ReadCommitted   []string `json:"read_committed"`
		ReadUncommitted []string `json:"read_uncommitted"`
	}
	runScript(t, py, &txn, "../testdata/confluent_txn.py", bootstrap, txnTopic)
	if want := "[c1-0 c1-1 c1-2 c1-3 c1-4 c2-0 c2-1 c2-2]"; fmt.Sprint(txn.ReadCommitted) != want {
		t.Fatalf("read_committed saw %v, want %s", txn.ReadCommitted, want)
	}
	if len(txn.ReadUncommitted) != 12 {
		t.Fatalf("read_uncommitted saw %d records (%v), want all 12 including the aborted ones", len(txn.ReadUncommitted), txn.ReadUncommitted)
	}
}

// runScript runs a confluent-kafka script and decodes its JSON output
// into out; librdkafka's protocol complaints on stderr fail the test.
func runScript(t *testing.T, py string, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(py, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s\n%s", args[0], err, stdout, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "PROTOERR") || strings.Contains(s, "Protocol parse failure") {
		t.Fatalf("librdkafka reported protocol errors:\n%s", s)
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("%s output %q: %v", args[0], stdout, err)
	}
}
