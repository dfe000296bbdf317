package clustertests

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// TestClusterCompactedOwnerChange: an idempotent producer whose batches
// the cleaner removed (its last one emptied) goes on producing, with the
// same producer id and epoch, after its partition's owner is SIGKILLed
// and another broker takes the partition over and recovers its producer
// state from the cleaned log; the table reads back the same.
func TestClusterCompactedOwnerChange(t *testing.T) {
	c := newCluster(t, 3)
	adm := c.admin()
	ctx := brokertest.Context(t, 2*time.Minute)
	for id := range c.brokers {
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: kmsg.StringPtr("50")}}, id)
		if err != nil || resp[0].Err != nil {
			t.Fatalf("broker %d: %v %v", id, err, resp[0].Err)
		}
	}
	const topic = "table"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": kmsg.StringPtr("compact"), "internal.segment.bytes": kmsg.StringPtr("2048"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.01"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	c.leaders(topic, 1)
	idem := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	other := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite())
	want := map[string]string{}
	produce := func(cl *kgo.Client, key, value string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatalf("producing %s=%s: %v", key, value, err)
		}
		want[key] = value
	}
	for i := 0; i < 40; i++ {
		produce(idem, "k"+strconv.Itoa(i%4), fmt.Sprintf("idem-%d", i))
	}
	pid, epoch, err := idem.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		produce(other, "k"+strconv.Itoa(i%4), fmt.Sprintf("other-%d-padding-padding", i))
	}
	table := func() (map[string]string, bool) {
		ends := c.endOffsets(topic)
		cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		got, idemLeft, last := map[string]string{}, false, int64(-1)
		for last < ends[0]-1 {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				got[string(r.Key)] = string(r.Value)
				idemLeft = idemLeft || len(r.Value) > 5 && string(r.Value[:5]) == "idem-"
				last = r.Offset
			})
		}
		return got, idemLeft
	}
	brokertest.Eventually(t, 60*time.Second, "the idempotent producer's records cleaned away", func() bool {
		_, left := table()
		return !left
	})
	owner := c.leaders(topic, 1)[0][0]
	c.brokers[owner].proc.Kill()
	c.waitMembers(2, owner)
	if next := c.leaders(topic, 1, owner)[0][0]; next == owner {
		t.Fatal("the partition did not move")
	}
	for i := 0; i < 8; i++ {
		produce(idem, "k"+strconv.Itoa(i%4), fmt.Sprintf("idem-after-%d", i))
	}
	if pid2, epoch2, err := idem.ProducerID(ctx); err != nil || pid2 != pid || epoch2 != epoch {
		t.Fatalf("producer %d/%d after the owner change, was %d/%d (%v)", pid2, epoch2, pid, epoch, err)
	}
	if got, _ := table(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table %v, want %v", got, want)
	}
}
