package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/model"
)

// partitionDoubt is a doubtWindow on one partition's lease (its gate).
type partitionDoubt struct {
	tp model.TopicPartition
	doubtWindow
}

func (d *partitionDoubt) hooks(c *Config) {
	c.RetentionCheckInterval = time.Hour // no retention tick takes the armed checks
	c.testHooks = &testHooks{partitionInDoubt: func(tp model.TopicPartition) bool {
		return tp == d.tp && d.inDoubt()
	}}
}

// TestDeleteRecordsDurableAfterLeaseDoubtIsNotAcknowledged: a
// DeleteRecords whose new log start offset became durable only once the
// partition's lease had fallen in doubt must not be answered as done. A
// peer may have taken the partition over from the files as they were
// before the checkpoint (its log would still serve the records the
// client was told are gone), and the segments must not be removed from
// under it. The outcome is unknown, as an append's is then:
// REQUEST_TIMED_OUT (docs/cluster.md), not success.
func TestDeleteRecordsDurableAfterLeaseDoubtIsNotAcknowledged(t *testing.T) {
	const topic = "doubt-delete"
	d := &partitionDoubt{tp: model.TopicPartition{Topic: topic, Partition: 0}}
	b := startTxnBroker(t, t.TempDir(), d.hooks)
	createTopic(t, b, topic, 1)
	ctx := testCtx(t)
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: 0}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 2})
	d.arm()
	resp, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := resp.Lookup(topic, 0)
	if !ok {
		t.Fatal("DeleteRecords: no answer for partition 0")
	}
	if r.Err != kerr.RequestTimedOut {
		t.Fatalf("DeleteRecords whose log start became durable once the lease was in doubt: err %v (low watermark %d), want REQUEST_TIMED_OUT (outcome unknown)", r.Err, r.LowWatermark)
	}
	if !d.didFire() {
		t.Fatal("the lease was never in doubt while the log start offset was written")
	}
}
