package broker_test

import (
	"errors"
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

// brokerID is a test broker's id (Config's default).
const brokerID = int32(0)

// dtp asks DescribeTopicPartitions (key 75) as the Java admin client does.
func dtp(t *testing.T, cl *kgo.Client, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	for _, name := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(brokertest.Context(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestDescribeTopicPartitions: every topic (internal ones too) paged by
// the partition limit with Apache's cursor, named topics, unknown and
// invalid names, and bad cursors answered INVALID_REQUEST.
func TestDescribeTopicPartitions(t *testing.T) {
	b := brokertest.Start(t)
	cl := brokertest.Client(t, b.Addr())
	brokertest.CreateTopic(t, b.Addr(), "alpha", 3, nil)
	brokertest.CreateTopic(t, b.Addr(), "beta", 2, nil)

	// Everything, two partitions at a time, following the cursor.
	type tp struct {
		topic string
		p     int32
	}
	var seen []tp
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("the cursor never ends")
		}
		resp := dtp(t, cl, 2, cursor)
		n := 0
		for _, rt := range resp.Topics {
			if rt.ErrorCode != 0 {
				t.Fatalf("topic %v: %v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
			}
			for _, p := range rt.Partitions {
				if p.LeaderID != brokerID || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.LeaderEpoch != 0 {
					t.Fatalf("%s-%d: %+v", *rt.Topic, p.Partition, p)
				}
				seen = append(seen, tp{*rt.Topic, p.Partition})
				n++
			}
			if *rt.Topic == "__consumer_offsets" && !rt.IsInternal {
				t.Fatal("__consumer_offsets not internal")
			}
		}
		if n > 2 {
			t.Fatalf("%d partitions in a page limited to 2", n)
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	// __consumer_offsets (50) and __transaction_state (50) sort first.
	if len(seen) != 105 || seen[0] != (tp{"__consumer_offsets", 0}) || seen[100] != (tp{"alpha", 0}) || seen[104] != (tp{"beta", 1}) {
		t.Fatalf("%d partitions seen: first %v, 100th %v, last %v", len(seen), seen[0], seen[100], seen[len(seen)-1])
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] == seen[i-1] {
			t.Fatalf("%v seen twice", seen[i])
		}
	}

	// Named topics, from a cursor inside one; unknown and invalid names.
	resp := dtp(t, cl, 2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "alpha", Partition: 1}, "beta", "alpha", "nope", "bad/name")
	got := map[string]*kmsg.DescribeTopicPartitionsResponseTopic{}
	for i := range resp.Topics {
		got[*resp.Topics[i].Topic] = &resp.Topics[i]
	}
	if a := got["alpha"]; a == nil || len(a.Partitions) != 2 || a.Partitions[0].Partition != 1 || a.TopicID == [16]byte{} {
		t.Fatalf("alpha from partition 1: %+v", a)
	}
	if bt := got["beta"]; bt == nil || len(bt.Partitions) != 2 {
		t.Fatalf("beta: %+v", bt)
	}
	if got["nope"] == nil || got["nope"].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", got["nope"])
	}
	if got["bad/name"] == nil || got["bad/name"].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid name: %+v", got["bad/name"])
	}
	if resp.NextCursor != nil {
		t.Fatalf("next cursor %+v with everything answered", resp.NextCursor)
	}

	// Bad cursors: a topic not named, a negative partition.
	for _, c := range []struct {
		cursor kmsg.DescribeTopicPartitionsRequestCursor
		topics []string
	}{
		{kmsg.DescribeTopicPartitionsRequestCursor{Topic: "beta", Partition: 0}, []string{"alpha"}},
		{kmsg.DescribeTopicPartitionsRequestCursor{Topic: "alpha", Partition: -1}, []string{"alpha"}},
	} {
		resp := dtp(t, cl, 10, &c.cursor, c.topics...)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics[0].Partitions) != 0 {
			t.Fatalf("cursor %+v over %v: %+v", c.cursor, c.topics, resp.Topics)
		}
	}
}

// TestLogDirsElectionsAndReassignmentsAlone: a single broker reports its
// data directory with every partition's real size, refuses to move a
// replica to a directory it does not have, needs no election, and takes
// no reassignment to another broker — all as Apache's errors, through
// kadm.
func TestLogDirsElectionsAndReassignmentsAlone(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.StartIn(t, dir)
	ctx := brokertest.Context(t, time.Minute)
	adm := brokertest.Admin(t, b.Addr())
	brokertest.CreateTopic(t, b.Addr(), "sized", 2, nil)
	cl := brokertest.Client(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sized", Partition: 1, Value: []byte(strings.Repeat("x", 100))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	ld, ok := dirs[brokerID][abs]
	if !ok || ld.Err != nil || len(dirs[brokerID]) != 1 {
		t.Fatalf("log dirs %+v, want one: %s", dirs, abs)
	}
	if ld.TotalBytes <= 0 || ld.UsableBytes <= 0 || ld.UsableBytes > ld.TotalBytes {
		t.Fatalf("volume sizes total %d usable %d", ld.TotalBytes, ld.UsableBytes)
	}
	for p := int32(0); p < 2; p++ {
		dp, ok := ld.Topics.Lookup("sized", p)
		onDisk := logBytes(t, filepath.Join(dir, "sized-"+string(rune('0'+p))))
		if !ok || dp.Size != onDisk || dp.OffsetLag != 0 || dp.IsFuture {
			t.Fatalf("sized-%d: %+v (present %v), %d bytes of .log on disk", p, dp, ok, onDisk)
		}
	}
	if dp, _ := ld.Topics.Lookup("sized", 1); dp.Size == 0 {
		t.Fatal("sized-1 reports no bytes after 20 records")
	}
	one, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{"sized": {0: {}}})
	if err != nil || len(one[brokerID][abs].Topics["sized"]) != 1 {
		t.Fatalf("one partition's log dir: %v %+v", err, one)
	}

	var moves kadm.AlterReplicaLogDirsReq
	moves.Add("/no/such/dir", kadm.TopicsSet{"sized": {0: {}}})
	moves.Add(abs, kadm.TopicsSet{"sized": {1: {}}})
	moved, err := adm.AlterAllReplicaLogDirs(ctx, moves)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int32]error{"sized": {0: kerr.LogDirNotFound, 1: nil}}
	moved.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if w := want[r.Topic][r.Partition]; !errors.Is(r.Err, w) && !(w == nil && r.Err == nil) {
			t.Errorf("move %s-%d to %s: %v, want %v", r.Topic, r.Partition, r.Dir, r.Err, w)
		}
	})
	// A partition not held here (kadm routes only known ones: ask raw).
	arl := kmsg.NewPtrAlterReplicaLogDirsRequest()
	arl.Dirs = []kmsg.AlterReplicaLogDirsRequestDir{{Dir: abs, Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "ghost", Partitions: []int32{0}}}}}
	if r := brokertest.Dial(t, b.Addr()).RoundTrip(arl).(*kmsg.AlterReplicaLogDirsResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.ReplicaNotAvailable.Code {
		t.Fatalf("move a partition not here: %+v", r)
	}

	elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"sized": {0: {}, 1: {}}, "ghost": {3: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := elected["sized"][0]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Fatalf("preferred election of sized-0: %+v", r)
	}
	if r := elected["ghost"][3]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("election of an unknown partition: %+v", r)
	}
	if all, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, nil); err != nil || len(all) != 0 {
		t.Fatalf("unclean election of everything: %v %+v (every partition has its leader)", err, all)
	}

	var re kadm.AlterPartitionAssignmentsReq
	re.Assign("sized", 0, []int32{brokerID})
	re.Assign("sized", 1, []int32{brokerID + 6})
	re.Assign("ghost", 0, []int32{brokerID})
	re.CancelAssign("sized", 1)
	res, err := adm.AlterPartitionAssignments(ctx, re)
	if err != nil {
		t.Fatal(err)
	}
	wantRe := map[string]map[int32]error{"sized": {0: nil, 1: kerr.NoReassignmentInProgress}, "ghost": {0: kerr.UnknownTopicOrPartition}}
	res.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		if w := wantRe[r.Topic][r.Partition]; !errors.Is(r.Err, w) && !(w == nil && r.Err == nil) {
			t.Errorf("reassign %s-%d: %v, want %v", r.Topic, r.Partition, r.Err, w)
		}
	})
	var away kadm.AlterPartitionAssignmentsReq
	away.Assign("sized", 1, []int32{brokerID + 6})
	res, err = adm.AlterPartitionAssignments(ctx, away)
	if err != nil {
		t.Fatal(err)
	}
	res.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		if !errors.Is(r.Err, kerr.InvalidReplicaAssignment) || !strings.Contains(r.ErrMessage, "no such broker is registered") {
			t.Errorf("reassign to a broker that does not exist: %v %q", r.Err, r.ErrMessage)
		}
	})
	listed, err := adm.ListPartitionReassignments(ctx, nil)
	if err != nil || len(listed) != 0 {
		t.Fatalf("reassignments in progress on one broker: %v %+v", err, listed)
	}

	res74, err := adm.ListConfigResources(ctx, kadm.ConfigResourceTopic)
	if err != nil {
		t.Fatal(err)
	}
	if names := res74.Names(); len(names) != 3 || names[2] != "sized" {
		t.Fatalf("config resources of topics: %v", names)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version, dc.IncludeFencedBrokers = 2, true
	dcr, err := dc.RequestWith(ctx, cl)
	if err != nil || dcr.ErrorCode != 0 || len(dcr.Brokers) != 1 || dcr.Brokers[0].IsFenced {
		t.Fatalf("describe cluster v2: %v %+v", err, dcr)
	}
}

// logBytes is the bytes of batches in a partition directory's segment
// files (without the room preallocated after the last one).
func logBytes(t *testing.T, dir string) int64 {
	t.Helper()
	return brokertest.BatchBytes(t, dir)
}
