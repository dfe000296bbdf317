package offsetlog

import (
	"reflect"
	"testing"
)

// TestConsumerRecordsReplay: every KIP-848 record type replays into the
// group's ConsumerState, tombstones remove what they name, a compacted
// log replays to the same state, and the group epoch's tombstone removes
// the consumer group while its offsets stay.
func TestConsumerRecordsReplay(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CompactMinBytes: 1}
	d := openTestDir(t, dir, opts)
	s, err := d.Slot(4)
	if err != nil {
		t.Fatal(err)
	}
	e, te := int32(7), int32(7)
	re := "orders-.*"
	tid := [16]byte{1, 2, 3}
	member := &ConsumerMember{InstanceID: strPtr("i1"), ClientID: "c", ClientHost: "/127.0.0.1",
		SubscribedTopicNames: []string{"a", "b"}, SubscribedTopicRegex: &re, RebalanceTimeoutMs: 45000, ServerAssignor: strPtr("range")}
	classic := &ConsumerMember{ClientID: "c3", SubscribedTopicNames: []string{"a"}, RebalanceTimeoutMs: 30000,
		Classic: &ClassicMember{SessionTimeoutMs: 10000, Protocols: []ClassicProtocol{{Name: "cooperative-sticky", Metadata: []byte{0, 3, 1}}, {Name: "range", Metadata: []byte{}}}}}
	current := &ConsumerAssignment{MemberEpoch: 7, PreviousMemberEpoch: 6, State: 1,
		Assigned: []TopicPartitions{{TopicID: tid, Partitions: []int32{0, 2}}}, PendingRevocation: []TopicPartitions{{TopicID: tid, Partitions: []int32{1}}}}
	appendAll(t, s,
		plain(OffsetRecord("g", tpA0, off(3))),
		plain(ConsumerEpochRecord("g", &e),
			ConsumerSubscriptionRecord("g", []ConsumerTopic{{ID: tid, Name: "a", Partitions: 3}}, false),
			ConsumerRegexRecord("g", re, &ConsumerRegex{Topics: []string{"orders-1"}, Version: 4, TimestampMs: 99}),
			ConsumerMemberRecord("g", "m1", member),
			ConsumerMemberRecord("g", "m2", &ConsumerMember{ClientID: "c2"}),
			ConsumerMemberRecord("g", "m3", classic),
			ConsumerTargetEpochRecord("g", &te),
			ConsumerTargetRecord("g", "m1", []TopicPartitions{{TopicID: tid, Partitions: []int32{0, 2}}}, false),
			ConsumerAssignmentRecord("g", "m1", current)),
		plain(ConsumerMemberRecord("g", "m2", nil)),
	)
	c := s.State().Groups["g"].Consumer
	if c == nil || c.Epoch != 7 || c.TargetEpoch != 7 || len(c.Topics) != 1 || c.Topics[0].Name != "a" || c.Topics[0].Partitions != 3 {
		t.Fatalf("consumer state: %+v", c)
	}
	if !reflect.DeepEqual(c.Members["m1"], member) || c.Members["m2"] != nil || !reflect.DeepEqual(c.Members["m3"], classic) {
		t.Fatalf("members: %+v", c.Members)
	}
	if !reflect.DeepEqual(c.Current["m1"], current) || !reflect.DeepEqual(c.Regexes[re], &ConsumerRegex{Topics: []string{"orders-1"}, Version: 4, TimestampMs: 99}) {
		t.Fatalf("current %+v regexes %+v", c.Current["m1"], c.Regexes)
	}
	want := s.State().Groups["g"].Clone()
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d = openTestDir(t, dir, opts)
	s, _ = d.Slot(4)
	got := s.State().Groups["g"]
	if !reflect.DeepEqual(got.Consumer, want.Consumer) || got.Offsets[tpA0].Offset != 3 {
		t.Fatalf("after compaction and reopen: %+v, want %+v", got.Consumer, want.Consumer)
	}
	appendAll(t, s, plain(ConsumerGroupTombstones("g", got.Consumer)...))
	if g := s.State().Groups["g"]; g == nil || g.Consumer != nil || g.Offsets[tpA0].Offset != 3 {
		t.Fatalf("after the tombstones: %+v", g)
	}
}

func strPtr(s string) *string { return &s }
