package clustertests

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/broker/brokertest/sharefetch"
)

// shareKeys are the share group APIs (KIP-932): ShareGroupHeartbeat,
// ShareGroupDescribe, ShareFetch, ShareAcknowledge and the share-group
// offsets admin calls.
var shareKeys = []int16{76, 77, 78, 79, 90, 91, 92}

// shareFlags are the broker flags of the share group tests: a new
// share-partition starts at the log start, members heartbeat often, and a
// record held by a member that stopped polling comes back within the test.
func shareFlags(addr string) []string {
	return []string{"--listen", addr, "--share-auto-offset-reset", "earliest",
		"--group-share-heartbeat-interval", "100ms", "--group-share-record-lock-duration", "15s"}
}

// TestClusterShareAPIsAdvertised: every cluster broker advertises the
// share APIs (franz-go's share consumer decides from ApiVersions).
func TestClusterShareAPIsAdvertised(t *testing.T) {
	c := newCluster(t, 2)
	for _, b := range c.brokers {
		resp := brokertest.Dial(t, b.addr).RoundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
		served := map[int16]bool{}
		for _, k := range resp.ApiKeys {
			served[k.ApiKey] = true
		}
		for _, k := range shareKeys {
			if !served[k] {
				t.Errorf("broker %s does not advertise %s in a cluster", b.addr, kmsg.NameForKey(k))
			}
		}
	}
}

// shareLedger is what the share consumers of a test were handed and had
// acknowledged, by record value.
type shareLedger struct {
	t      *testing.T
	mu     sync.Mutex
	counts map[string][]int32  // every delivery's DeliveryCount, in order
	by     map[string]string   // the consumer of the last delivery
	acked  map[string]bool     // acknowledgement answered without error
	at     map[[2]int64]string // (partition, offset) → value
	// doubt are records whose acknowledgement was not answered: the broker
	// may have applied it or not. Whether it has them done is checked on
	// its side at the end (DescribeShareGroupOffsets).
	doubt  map[string]bool
	killed atomic.Bool
	// fails counts, per partition, the acknowledgements that failed or
	// were dropped: a poll whose partition's count moved is in doubt.
	fails sync.Map // int32 → *atomic.Int64
}

func (l *shareLedger) failsOf(p int32) *atomic.Int64 {
	v, _ := l.fails.LoadOrStore(p, new(atomic.Int64))
	return v.(*atomic.Int64)
}

func (l *shareLedger) callback(_ *kgo.Client, rs kgo.ShareAckResults) {
	for _, r := range rs {
		if r.Err != nil {
			l.failsOf(r.Partition).Add(1)
		}
	}
}

// delivered notes one delivery and checks it: nothing acknowledged comes
// back, a record comes back only with a higher delivery count, and before
// the kill no record goes to two consumers.
func (l *shareLedger) delivered(consumer string, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, n := string(r.Value), int32(r.DeliveryCount())
	if l.acked[v] {
		l.t.Errorf("record %s (partition %d offset %d) delivered to %s again (delivery %d) after its acknowledgement was answered", v, r.Partition, r.Offset, consumer, n)
	}
	if prev := l.counts[v]; len(prev) > 0 {
		if !l.killed.Load() {
			l.t.Errorf("record %s delivered to %s and to %s before any broker died", v, l.by[v], consumer)
		}
		if last := prev[len(prev)-1]; n <= last {
			l.t.Errorf("record %s delivered again with delivery count %d after %d: the count was not kept", v, n, last)
		}
	}
	l.counts[v] = append(l.counts[v], n)
	l.at[[2]int64{int64(r.Partition), r.Offset}] = v
	l.by[v] = consumer
}

func (l *shareLedger) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// missing counts the records of 0..n-1 neither acknowledged nor in doubt.
func (l *shareLedger) missing(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := 0
	for i := range n {
		if v := strconv.Itoa(i); !l.acked[v] && !l.doubt[v] {
			k++
		}
	}
	return k
}

// consume polls, accepts every record and flushes, until done; a poll's
// records count as acknowledged when the flush succeeded and no
// acknowledgement of their partition failed meanwhile.
func (l *shareLedger) consume(ctx context.Context, name string, cl *kgo.Client, done func() bool) {
	for ctx.Err() == nil && !done() {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		var recs []*kgo.Record
		before := map[int32]int64{}
		for r := range fs.RecordsAll() {
			if _, ok := before[r.Partition]; !ok {
				before[r.Partition] = l.failsOf(r.Partition).Load()
			}
			l.delivered(name, r)
			r.Ack(kgo.AckAccept)
			recs = append(recs, r)
		}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := cl.FlushAcks(fctx)
		cancel()
		l.mu.Lock()
		for _, r := range recs {
			if err == nil && l.failsOf(r.Partition).Load() == before[r.Partition] {
				l.acked[string(r.Value)] = true
			} else {
				// Unanswered: the broker may have applied it (and then
				// never delivers the record again) or not (and does).
				l.doubt[string(r.Value)] = true
			}
		}
		l.mu.Unlock()
	}
}

// TestClusterShareGroupOwnerKilled: franz-go's share consumer on a
// 3-broker cluster, on a topic whose partitions are spread over every
// broker, so most are owned by brokers other than the group's
// coordinator. Two consumers get disjoint records and acknowledge them; a
// holder acquires records of one partition and never acknowledges them.
// Then that partition's owner, not the coordinator, is SIGKILLed
// mid-consumption, and another broker takes its partitions over (loading
// their share state from the shared volume, as a restart does). Nothing
// acknowledged is delivered again, nothing is lost (every share-partition
// is done up to its end offset), and the held records come back with
// their delivery counts kept (2, not 1: a new owner that lost them would
// deliver them at 1).
func TestClusterShareGroupOwnerKilled(t *testing.T) {
	c := newClusterWith(t, 3, func(c *cluster) { c.listen = shareFlags })
	const topic, group, parts, n = "share-kill", "sg-kill", 6, 1200
	c.createTopic(topic, parts)
	owners := c.leaders(topic, parts)
	coordinator := c.groupCoordinatorOf(group)
	elsewhere := 0
	for _, o := range owners {
		if o[0] != coordinator {
			elsewhere++
		}
	}
	if elsewhere == 0 {
		t.Fatalf("every partition is owned by the coordinator %d: %v", coordinator, owners)
	}

	ctx := brokertest.Context(t, 3*time.Minute)
	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, kgo.StringRecord(strconv.Itoa(i)))
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	l := &shareLedger{t: t, counts: map[string][]int32{}, by: map[string]string{}, acked: map[string]bool{}, doubt: map[string]bool{}, at: map[[2]int64]string{}}
	shareClient := func(max int32) *kgo.Client {
		return c.client(kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(max), kgo.ShareAckCallback(l.callback))
	}

	// The holder acquires records of a partition the coordinator does not
	// own straight from its owner, with a ShareFetch of its own, and never
	// acknowledges them (the owner, as Apache's leader, does not ask the
	// coordinator about the member). It is no member, so the consumers are
	// assigned every partition.
	var heldPart int32 = -1
	for p := range int32(parts) {
		if owners[p][0] != coordinator {
			heldPart = p
		}
	}
	victim := owners[heldPart][0]
	md, err := c.admin().Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	tid := md.Topics[topic].ID
	held := map[int64]bool{} // offsets of heldPart
	brokertest.Eventually(t, 30*time.Second, "the holder holding records", func() bool {
		group, member := group, "holder-0000000000000000000000"
		req := sharefetch.Request(group, member, 0, tid, heldPart, 1000, 30)
		resp, err := c.brokerClient(victim).Broker(int(victim)).Request(ctx, req)
		if err != nil {
			return false
		}
		for _, t := range resp.(*kmsg.ShareFetchResponse).Topics {
			for _, p := range t.Partitions {
				for _, ar := range p.AcquiredRecords {
					for o := ar.FirstOffset; o <= ar.LastOffset; o++ {
						held[o] = true
					}
				}
			}
		}
		return len(held) > 0
	})

	var wg sync.WaitGroup
	var stop atomic.Bool
	all := stop.Load
	for _, name := range []string{"a", "b"} {
		cl := shareClient(50)
		wg.Add(1)
		go func() { defer wg.Done(); l.consume(ctx, name, cl, all) }()
	}
	defer wg.Wait()
	defer stop.Store(true)

	brokertest.Eventually(t, 90*time.Second, "a third of the records acknowledged", func() bool { return l.ackedCount() >= n/3 })
	l.killed.Store(true)
	c.brokers[victim].proc.Kill()
	before := l.ackedCount()
	c.leaders(topic, parts, victim)

	deadline := time.Now().Add(150 * time.Second)
	for l.missing(n) > 0 {
		if time.Now().After(deadline) {
			l.mu.Lock()
			missing := map[int32]int{}
			for i := range n {
				if !l.acked[strconv.Itoa(i)] {
					missing[int32(i%parts)]++ // the round-robin partitioner's
				}
			}
			l.mu.Unlock()
			for id, m := range c.brokers {
				if id != victim {
					t.Logf("broker %d share coordinator: %.6000s", id, c.adminGet(id, "/api/actors/share/coordinator"))
				}
				_ = m
			}
			t.Fatalf("after the kill of %d: %d of %d acknowledged; missing by partition (round robin, roughly) %v; owners before %v", victim, l.ackedCount(), n, missing, owners)
		}
		time.Sleep(50 * time.Millisecond) // polling the consumers' progress, not waiting for time
	}
	if before >= n {
		t.Fatalf("everything was acknowledged before the kill; nothing checked")
	}
	// Nothing lost: on the brokers' side too every record is done (each
	// share-partition's start at its end offset), the records in doubt
	// included; the consumers run until then.
	ends := c.endOffsets(topic)
	adm := c.admin()
	brokertest.Eventually(t, 60*time.Second, "every share-partition done up to its end offset", func() bool {
		offs, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil {
			return false
		}
		done := 0
		for _, o := range offs[group].Offsets[topic] {
			if o.Err == nil && o.StartOffset == ends[o.Partition] && o.Lag == 0 {
				done++
			}
		}
		return done == parts
	})
	stop.Store(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	for o := range held {
		v := l.at[[2]int64{int64(heldPart), o}]
		if counts := l.counts[v]; len(counts) == 0 || counts[0] != 2 {
			t.Errorf("offset %d of partition %d, held at the kill: deliveries %v after the holder's, want the first with count 2", o, heldPart, counts)
		}
	}
	t.Logf("coordinator %d, killed %d; %d acknowledged before the kill, %d held of partition %d; %s",
		coordinator, victim, before, len(held), heldPart, fmt.Sprint(owners))
}

// TestClusterShareGroupOffsetsAdmin: kadm's share-group offsets calls on
// a 3-broker cluster, answered by the group's coordinator with the state
// of share-partitions owned by every broker: describe after a share
// consumer accepted everything, NON_EMPTY_GROUP while it is a member,
// then alter and delete once it left.
func TestClusterShareGroupOffsetsAdmin(t *testing.T) {
	c := newClusterWith(t, 3, func(c *cluster) { c.listen = shareFlags })
	const topic, group, parts, per = "share-admin", "sg-admin", 6, 10
	c.createTopic(topic, parts)
	owners := c.leaders(topic, parts)
	ctx := brokertest.Context(t, 2*time.Minute)
	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := range int32(parts) {
		for i := range per {
			recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < parts*per && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		for r := range fs.RecordsAll() {
			r.Ack(kgo.AckAccept)
			got++
		}
		if err := cl.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	adm := c.admin()
	starts := func() map[int32]int64 {
		offs, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		for _, o := range offs[group].Offsets[topic] {
			if o.Err != nil {
				t.Fatalf("partition %d: %v", o.Partition, o.Err)
			}
			if o.StartOffset >= 0 {
				out[o.Partition] = o.StartOffset
			}
		}
		return out
	}
	brokertest.Eventually(t, 30*time.Second, "every share-partition's start past what was accepted", func() bool {
		s := starts()
		for p := range int32(parts) {
			if s[p] != per {
				return false
			}
		}
		return true
	})
	var at kadm.Offsets
	for p := range int32(parts) {
		at.AddOffset(topic, p, 3, -1)
	}
	if _, err := adm.AlterShareGroupOffsets(ctx, group, at); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("altering a group with a member: %v", err)
	}
	cl.Close()
	brokertest.Eventually(t, 30*time.Second, "the share group empty", func() bool {
		ds, err := adm.DescribeShareGroups(ctx, group)
		return err == nil && ds[group].Err == nil && len(ds[group].Members) == 0
	})
	res, err := adm.AlterShareGroupOffsets(ctx, group, at)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		if e, ok := res.Lookup(topic, p); !ok || e != nil {
			t.Fatalf("alter of partition %d (owner %d): %v %v", p, owners[p][0], e, ok)
		}
	}
	if s := starts(); len(s) != parts || s[0] != 3 || s[parts-1] != 3 {
		t.Fatalf("after the alter: %v", s)
	}
	if _, err := adm.DeleteShareGroupOffsets(ctx, group, topic); err != nil {
		t.Fatal(err)
	}
	if s := starts(); len(s) != 0 {
		t.Fatalf("after the delete: %v", s)
	}
}
