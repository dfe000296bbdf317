package broker_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/broker/brokertest/tools"
)

// librdkafka (via confluent-kafka) is told kaas's throttle times: a
// producer over its producer_byte_rate quota sees throttle events in its
// throttle_cb, and its messages are still all delivered.
func TestLibrdkafkaSeesThrottleTimes(t *testing.T) {
	py := tools.Python(t)
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "rdkafka-throttled", 1, nil)
	req := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type, ent.Name = "client-id", kmsg.StringPtr("rdk-throttled")
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = "producer_byte_rate", 16<<10
	e.Entity, e.Ops = append(e.Entity, ent), append(e.Ops, op)
	req.Entries = append(req.Entries, e)
	resp, err := req.RequestWith(brokertest.Context(t, 30*time.Second), brokertest.Client(t, b.Addr()))
	if err != nil || resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("setting the quota: %v %+v", err, resp)
	}
	cmd := exec.Command(py, "testdata/confluent_throttle.py", b.Addr(), "rdkafka-throttled", "rdk-throttled")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("confluent-kafka script: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Throttles   int     `json:"throttles"`
		MaxThrottle float64 `json:"max_throttle"` // seconds
		Delivered   int     `json:"delivered"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("script output %q: %v", out, err)
	}
	t.Logf("librdkafka: %d throttle events, longest %.3f s, %d messages delivered", got.Throttles, got.MaxThrottle, got.Delivered)
	if got.Throttles == 0 || got.MaxThrottle <= 0 || got.Delivered == 0 {
		t.Fatalf("librdkafka saw %+v; want throttle events and deliveries", got)
	}
}
