package broker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// TestInternalTopics: __consumer_offsets and __transaction_state appear in
// Metadata as Apache shows them (internal, 50 partitions), kadm lists them
// only when asked for internal topics, kcat -L lists them, produce and
// transactional writes to them are refused with Apache's codes, they read
// as empty, and they cannot be created, deleted or grown.
func TestInternalTopics(t *testing.T) {
	b := brokertest.Start(t)
	adm := brokertest.Admin(t, b.Addr())
	ctx := brokertest.Context(t, time.Minute)
	brokertest.CreateTopic(t, b.Addr(), "plain", 1, nil)

	all, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"__consumer_offsets", "__transaction_state"} {
		td, ok := all[name]
		if !ok || td.Err != nil {
			t.Fatalf("%s missing from metadata: %+v", name, td)
		}
		if !td.IsInternal || len(td.Partitions) != 50 || td.ID == [16]byte{} {
			t.Fatalf("%s: internal %v, %d partitions, id %v; want internal, 50, an id", name, td.IsInternal, len(td.Partitions), td.ID)
		}
		// By name and by id, as a client asks once it knows the topic.
		byName, err := adm.ListTopicsWithInternal(ctx, name)
		if err != nil || byName[name].Err != nil || byName[name].ID != td.ID {
			t.Fatalf("%s by name: %v %+v", name, err, byName[name])
		}
	}
	user, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := user.Names(); len(names) != 1 || names[0] != "plain" {
		t.Fatalf("ListTopics without internal topics: %v", names)
	}
	md := kcat(t, "", "-b", b.Addr(), "-L")
	if !strings.Contains(md, `topic "__consumer_offsets" with 50 partitions`) || !strings.Contains(md, `topic "__transaction_state" with 50 partitions`) {
		t.Fatalf("kcat -L does not list the internal topics:\n%s", md)
	}

	// Produce: INVALID_TOPIC_EXCEPTION, and nothing is auto-created.
	cl := brokertest.Client(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Partition: 3, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", err)
	}

	// A transaction may not add an internal partition.
	apt := kmsg.NewPtrAddPartitionsToTxnRequest()
	apt.Version = 3
	apt.TransactionalID, apt.ProducerID, apt.ProducerEpoch = "internal-txn", 1, 0
	tt := kmsg.NewAddPartitionsToTxnRequestTopic()
	tt.Topic, tt.Partitions = "__transaction_state", []int32{0}
	pt := kmsg.NewAddPartitionsToTxnRequestTopic()
	pt.Topic, pt.Partitions = "plain", []int32{0}
	apt.Topics = append(apt.Topics, tt, pt)
	aresp, err := apt.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range aresp.Topics {
		want := kerr.OperationNotAttempted.Code
		if rt.Topic == "__transaction_state" {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if rt.Partitions[0].ErrorCode != want {
			t.Fatalf("AddPartitionsToTxn %s: code %d, want %d", rt.Topic, rt.Partitions[0].ErrorCode, want)
		}
	}

	// Reads: start and end 0, an empty fetch.
	starts, err := adm.ListStartOffsets(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 50; p++ {
		s, _ := starts.Lookup("__consumer_offsets", p)
		e, _ := ends.Lookup("__consumer_offsets", p)
		if s.Err != nil || e.Err != nil || s.Offset != 0 || e.Offset != 0 {
			t.Fatalf("partition %d: start %+v end %+v", p, s, e)
		}
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis, fetch.MaxBytes = 10, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "__consumer_offsets", all["__consumer_offsets"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = 7, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fresp, err := fetch.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if p := fresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.HighWatermark != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch __consumer_offsets-7: code %d hwm %d %d bytes", p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
	}

	// Admin changes are refused.
	created, err := adm.CreateTopics(ctx, 1, 1, nil, "__consumer_offsets")
	if err != nil || !errors.Is(created["__consumer_offsets"].Err, kerr.TopicAlreadyExists) {
		t.Fatalf("create __consumer_offsets: %v %+v", err, created)
	}
	collides, err := adm.CreateTopics(ctx, 1, 1, nil, "__consumer.offsets")
	if err != nil || !errors.Is(collides["__consumer.offsets"].Err, kerr.InvalidTopicException) {
		t.Fatalf("create __consumer.offsets: %v %+v", err, collides)
	}
	deleted, err := adm.DeleteTopics(ctx, "__transaction_state")
	if err != nil || !errors.Is(deleted["__transaction_state"].Err, kerr.InvalidRequest) {
		t.Fatalf("delete __transaction_state: %v %+v", err, deleted)
	}
	grown, err := adm.CreatePartitions(ctx, 2, "__consumer_offsets")
	if err != nil || !errors.Is(grown["__consumer_offsets"].Err, kerr.InvalidRequest) {
		t.Fatalf("grow __consumer_offsets: %v %+v", err, grown)
	}
	if all, err := adm.ListTopicsWithInternal(ctx, "__transaction_state"); err != nil || len(all["__transaction_state"].Partitions) != 50 {
		t.Fatalf("__transaction_state changed: %v %+v", err, all)
	}
}

// TestRegexConsumerSkipsInternalTopics: a franz-go regex consumer whose
// pattern matches the internal topics consumes the user topic it matches
// and skips __consumer_offsets, as it does against Apache; a consumer that
// names __consumer_offsets reads it (empty).
func TestRegexConsumerSkipsInternalTopics(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "__user_topic", 1, nil)
	ctx := brokertest.Context(t, time.Minute)
	cl := brokertest.Client(t, b.Addr(),
		kgo.ConsumeTopics("__.*"), kgo.ConsumeRegex(),
		kgo.MetadataMinAge(100*time.Millisecond))
	brokertest.Eventually(t, 15*time.Second, "the regex resolves to the user topic", func() bool {
		topics := cl.GetConsumeTopics()
		return len(topics) == 1 && topics[0] == "__user_topic"
	})
	// Asked for by name (no regex), the internal topic is consumed: empty,
	// without errors.
	direct := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics("__consumer_offsets"))
	pollCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	fs := direct.PollFetches(pollCtx)
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("consuming %s-%d: %v", topic, p, err)
		}
	})
	if n := fs.NumRecords(); n != 0 {
		t.Fatalf("consumed %d records from __consumer_offsets", n)
	}
}
