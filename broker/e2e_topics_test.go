package broker_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// TestCreateTopicsErrors covers CreateTopics' per-topic answers through
// kadm and raw requests: each failure is the error code Apache sends, and
// nothing is created for it.
func TestCreateTopicsErrors(t *testing.T) {
	b := brokertest.Start(t)
	adm := brokertest.Admin(t, b.Addr())
	ctx := brokertest.Context(t, time.Minute)
	brokertest.CreateTopic(t, b.Addr(), "exists", 1, nil)
	brokertest.CreateTopic(t, b.Addr(), "dotted.name", 1, nil)

	shred := map[string]*string{"cleanup.policy": kmsg.StringPtr("compact,shred")}
	for _, tc := range []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    map[string]*string
		want       error
		msg        string // a substring of the error message, if any
	}{
		{"already exists", "exists", 1, 1, nil, kerr.TopicAlreadyExists, "already exists"},
		{"empty name", "", 1, 1, nil, kerr.InvalidTopicException, ""},
		{"illegal character", "bad/name", 1, 1, nil, kerr.InvalidTopicException, "illegal"},
		{"dot", ".", 1, 1, nil, kerr.InvalidTopicException, ""},
		{"too long", strings.Repeat("a", 250), 1, 1, nil, kerr.InvalidTopicException, "249"},
		{"collides with a dotted name", "dotted_name", 1, 1, nil, kerr.InvalidTopicException, "collides"},
		{"zero partitions", "p0", 0, 1, nil, kerr.InvalidPartitions, ""},
		{"negative partitions", "pneg", -5, 1, nil, kerr.InvalidPartitions, ""},
		{"replication factor 2 on one broker", "rf2", 1, 2, nil, kerr.InvalidReplicationFactor, ""},
		{"replication factor 0", "rf0", 1, 0, nil, kerr.InvalidReplicationFactor, ""},
		{"unknown cleanup policy", "shredded", 1, 1, shred, kerr.InvalidConfig, "Invalid value compact,shred for configuration cleanup.policy: String must be one of: compact, delete"},
		{"unknown config", "unknowncfg", 1, 1, map[string]*string{"no.such.config": kmsg.StringPtr("1")}, kerr.InvalidConfig, "no.such.config"},
		{"bad config value", "badcfg", 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("soon")}, kerr.InvalidConfig, "retention.ms"},
		{"config below its minimum", "smallseg", 1, 1, map[string]*string{"segment.bytes": kmsg.StringPtr("10")}, kerr.InvalidConfig, "segment.bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, err := adm.CreateTopics(ctx, tc.partitions, tc.rf, tc.configs, tc.topic)
			if err != nil {
				t.Fatal(err)
			}
			resp := all[tc.topic]
			if !errors.Is(resp.Err, tc.want) {
				t.Fatalf("error %v (%s), want %v", resp.Err, resp.ErrMessage, tc.want)
			}
			if !strings.Contains(resp.ErrMessage, tc.msg) {
				t.Fatalf("message %q does not mention %q", resp.ErrMessage, tc.msg)
			}
		})
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 2 {
		t.Fatalf("topics after the failed creations: %v, want only exists and dotted.name", names)
	}

	// A name twice in one request is INVALID_REQUEST for both.
	req := kmsg.NewPtrCreateTopicsRequest()
	for i := 0; i < 2; i++ {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "twice", 1, 1
		req.Topics = append(req.Topics, rt)
	}
	dup, err := req.RequestWith(ctx, brokertest.Client(t, b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range dup.Topics {
		if rt.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("duplicate topic in one request: %v", kerr.ErrorForCode(rt.ErrorCode))
		}
	}
}

// TestCreateTopicsValidateOnly: validate_only checks everything, answers
// as a creation would, and creates nothing.
func TestCreateTopicsValidateOnly(t *testing.T) {
	b := brokertest.Start(t)
	adm := brokertest.Admin(t, b.Addr())
	ctx := brokertest.Context(t, time.Minute)
	resp, err := adm.ValidateCreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000")}, "dry")
	if err != nil {
		t.Fatal(err)
	}
	r := resp["dry"]
	if r.Err != nil || r.NumPartitions != 3 || r.ReplicationFactor != 1 {
		t.Fatalf("validate_only: %v, %d partitions, rf %d", r.Err, r.NumPartitions, r.ReplicationFactor)
	}
	if c, ok := r.Configs["retention.ms"]; !ok || c.Value == nil || *c.Value != "1000" {
		t.Fatalf("validate_only answer lacks retention.ms=1000: %+v", r.Configs)
	}
	bad, err := adm.ValidateCreateTopics(ctx, 1, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("shred")}, "dry")
	if err != nil || !errors.Is(bad["dry"].Err, kerr.InvalidConfig) {
		t.Fatalf("validate_only with an unknown policy: %v %v", err, bad["dry"].Err)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil || len(topics) != 0 {
		t.Fatalf("validate_only created %v (%v)", topics.Names(), err)
	}
	if entries, _ := os.ReadDir(filepath.Join(b.DataDir(), "__cluster", "topics")); len(entries) != 0 {
		t.Fatalf("validate_only wrote metadata: %v", entries)
	}
}

// TestDeleteTopics: deletion answers per topic, removes the data, and a
// topic recreated under the same name starts empty with a new id.
func TestDeleteTopics(t *testing.T) {
	b := brokertest.Start(t)
	adm := brokertest.Admin(t, b.Addr())
	ctx := brokertest.Context(t, time.Minute)
	brokertest.CreateTopic(t, b.Addr(), "doomed", 2, nil)
	cl := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("doomed"))
	if err := cl.ProduceSync(ctx, kgo.StringRecord("a"), kgo.StringRecord("b")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before, err := adm.ListTopics(ctx, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := adm.DeleteTopics(ctx, "doomed", "never-was")
	if err != nil {
		t.Fatal(err)
	}
	if resp["doomed"].Err != nil {
		t.Fatalf("deleting doomed: %v", resp["doomed"].Err)
	}
	if !errors.Is(resp["never-was"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("deleting an unknown topic: %v", resp["never-was"].Err)
	}
	for p := 0; p < 2; p++ {
		if _, err := os.Stat(filepath.Join(b.DataDir(), "doomed-"+string(rune('0'+p)))); !os.IsNotExist(err) {
			t.Fatalf("partition directory doomed-%d still there: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(b.DataDir(), "__cluster", "topics", "doomed.json")); !os.IsNotExist(err) {
		t.Fatalf("topic metadata still there: %v", err)
	}

	brokertest.CreateTopic(t, b.Addr(), "doomed", 1, nil)
	// A fresh client: kadm answers ListTopics from its client's metadata cache.
	after, err := brokertest.Admin(t, b.Addr()).ListTopics(ctx, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	if after["doomed"].ID == before["doomed"].ID {
		t.Fatalf("a recreated topic kept the old topic id %v (before %v)", after["doomed"].ID, before["doomed"].ID)
	}
	ends, err := adm.ListEndOffsets(ctx, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("doomed", 0); o.Offset != 0 || o.Err != nil {
		t.Fatalf("recreated topic ends at %d (%v), want 0", o.Offset, o.Err)
	}

	// By topic id (DeleteTopics v6): unknown ids are UNKNOWN_TOPIC_ID.
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	byID := kmsg.NewDeleteTopicsRequestTopic()
	byID.TopicID = after["doomed"].ID
	unknown := kmsg.NewDeleteTopicsRequestTopic()
	unknown.TopicID = [16]byte{1, 2, 3}
	req.Topics = append(req.Topics, byID, unknown)
	dresp := brokertest.Dial(t, b.Addr()).RoundTrip(req).(*kmsg.DeleteTopicsResponse)
	if dresp.Topics[0].ErrorCode != 0 || dresp.Topics[0].Topic == nil || *dresp.Topics[0].Topic != "doomed" {
		t.Fatalf("delete by id: %+v", dresp.Topics[0])
	}
	if dresp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("delete by unknown id: %v", kerr.ErrorForCode(dresp.Topics[1].ErrorCode))
	}
}

// TestCreatePartitions grows a topic through kadm; the new partitions take
// writes and survive a restart. Shrinking, an equal count, an unknown
// topic and validate_only answer as Apache does.
func TestCreatePartitions(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.StartIn(t, dir)
	adm := brokertest.Admin(t, b.Addr())
	ctx := brokertest.Context(t, time.Minute)
	brokertest.CreateTopic(t, b.Addr(), "growing", 1, nil)

	dry, err := adm.ValidateCreatePartitions(ctx, 5, "growing")
	if err != nil || dry["growing"].Err != nil {
		t.Fatalf("validate_only: %v %v", err, dry["growing"].Err)
	}
	if n := partitionCount(t, b.Addr(), "growing"); n != 1 {
		t.Fatalf("validate_only grew the topic to %d partitions", n)
	}
	for _, tc := range []struct {
		name  string
		topic string
		set   int
		want  error
	}{
		{"shrink", "growing", 0, kerr.InvalidPartitions},
		{"same count", "growing", 1, kerr.InvalidPartitions},
		{"unknown topic", "nope", 3, kerr.UnknownTopicOrPartition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := adm.UpdatePartitions(ctx, tc.set, tc.topic)
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(resp[tc.topic].Err, tc.want) {
				t.Fatalf("error %v, want %v", resp[tc.topic].Err, tc.want)
			}
		})
	}
	resp, err := adm.CreatePartitions(ctx, 2, "growing")
	if err != nil || resp["growing"].Err != nil {
		t.Fatalf("adding 2 partitions: %v %v", err, resp["growing"].Err)
	}
	cl := brokertest.Client(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 3; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "growing", Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("producing to partition %d: %v", p, err)
		}
	}
	brokertest.Stop(t, b)
	b = brokertest.StartIn(t, dir)
	if n := partitionCount(t, b.Addr(), "growing"); n != 3 {
		t.Fatalf("after restart: %d partitions, want 3", n)
	}
	ends, err := brokertest.Admin(t, b.Addr()).ListEndOffsets(ctx, "growing")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 1 {
			t.Errorf("partition %d ends at %d after restart, want 1", o.Partition, o.Offset)
		}
	})
}

func partitionCount(t *testing.T, addr, topic string) int {
	t.Helper()
	md, err := brokertest.Admin(t, addr).ListTopics(brokertest.Context(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	return len(md[topic].Partitions)
}

// TestDeleteRecords moves log start offsets through kadm: -1 means the
// high watermark, beyond it is OFFSET_OUT_OF_RANGE, unknown partitions
// UNKNOWN_TOPIC_OR_PARTITION; a consumer positioned below the new start
// is told OFFSET_OUT_OF_RANGE and resets; the start survives a restart.
func TestDeleteRecords(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.StartIn(t, dir)
	brokertest.CreateTopic(t, b.Addr(), "trimmed", 2, map[string]*string{"internal.segment.bytes": kmsg.StringPtr("200")})
	cl := brokertest.Client(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := brokertest.Context(t, time.Minute)
	for i := 0; i < 10; i++ {
		for p := int32(0); p < 2; p++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "trimmed", Partition: p, Value: []byte(strings.Repeat("d", 60))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	adm := brokertest.Admin(t, b.Addr())
	if r := deleteRecords(t, adm, "trimmed", 0, 6); r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("delete before 6: %d, %v", r.LowWatermark, r.Err)
	}
	if r := deleteRecords(t, adm, "trimmed", 1, -1); r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("delete up to the high watermark (-1): %d, %v", r.LowWatermark, r.Err)
	}
	if r := deleteRecords(t, adm, "trimmed", 0, 11); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete past the high watermark: %v", r.Err)
	}
	// kadm does not send partitions it has no metadata for: ask directly.
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "trimmed"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 9, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if r := brokertest.Dial(t, b.Addr()).RoundTrip(req).(*kmsg.DeleteRecordsResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	// Segments wholly below the start are gone from disk.
	if m, _ := filepath.Glob(filepath.Join(dir, "trimmed-1", "*.log")); len(m) != 1 {
		t.Fatalf("%d segments left on partition 1, want only the active one", len(m))
	}

	// A consumer asking for offset 2 is out of range and resets to the start.
	c := brokertest.Dial(t, b.Addr())
	fp := c.RoundTrip(brokertest.FetchRequest("trimmed", 0, 2, 0, 1, 1<<20, 1<<20)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if fp.ErrorCode != kerr.OffsetOutOfRange.Code || fp.LogStartOffset != 6 {
		t.Fatalf("fetch below the start: %v, log start %d", kerr.ErrorForCode(fp.ErrorCode), fp.LogStartOffset)
	}
	consumer := brokertest.Client(t, b.Addr(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"trimmed": {0: kgo.NewOffset().At(2)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := consumer.PollFetches(ctx)
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 6 {
		t.Fatalf("a consumer reset after OFFSET_OUT_OF_RANGE should start at 6: %d records, errors %v", len(recs), fs.Errors())
	}

	brokertest.Stop(t, b)
	b = brokertest.StartIn(t, dir)
	starts, err := brokertest.Admin(t, b.Addr()).ListStartOffsets(ctx, "trimmed")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 6, 1: 10} {
		if o, _ := starts.Lookup("trimmed", p); o.Offset != want {
			t.Errorf("partition %d starts at %d after restart, want %d", p, o.Offset, want)
		}
	}
}

// TestRecreatedTopicIgnoresAStrayDirectory: a deleted topic's partition
// directory left in place (the broker died during the deletion, or in a
// cluster its owner's lease was in doubt) is not opened as the partition
// of a topic created again under the same name: the directory names its
// topic's id (partition.metadata) and another id's is removed first.
func TestRecreatedTopicIgnoresAStrayDirectory(t *testing.T) {
	b := brokertest.Start(t)
	ctx := brokertest.Context(t, time.Minute)
	brokertest.CreateTopic(t, b.Addr(), "again", 1, nil)
	cl := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("again"))
	if err := cl.ProduceSync(ctx, kgo.StringRecord("a"), kgo.StringRecord("b"), kgo.StringRecord("c")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(b.DataDir(), "again-0")
	kept := filepath.Join(t.TempDir(), "again-0")
	if out, err := exec.Command("cp", "-a", dir, kept).CombinedOutput(); err != nil {
		t.Fatalf("copying the partition directory: %v: %s", err, out)
	}
	adm := brokertest.Admin(t, b.Addr())
	if resp, err := adm.DeleteTopics(ctx, "again"); err != nil || resp["again"].Err != nil {
		t.Fatalf("deleting: %v %v", err, resp["again"].Err)
	}
	if out, err := exec.Command("cp", "-a", kept, dir).CombinedOutput(); err != nil { // as a deletion cut short leaves it
		t.Fatalf("putting the directory back: %v: %s", err, out)
	}
	brokertest.CreateTopic(t, b.Addr(), "again", 1, nil)
	ends, err := brokertest.Admin(t, b.Addr()).ListEndOffsets(ctx, "again")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("again", 0); o.Offset != 0 || o.Err != nil {
		t.Fatalf("the recreated topic ends at %d (%v): it opened the deleted topic's directory", o.Offset, o.Err)
	}
	if strays, _ := filepath.Glob(filepath.Join(b.DataDir(), ".*.stray")); len(strays) > 0 {
		t.Fatalf("the stray directory is still there: %v", strays)
	}
}
