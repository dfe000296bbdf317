package broker_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
)

// Fetch sessions (KIP-227) through the wire: hand-made requests for the
// exact codes, and a franz-go consumer (which uses sessions by default).

// sessionFetch is a v12 fetch of topic's partitions (below 64) at their
// offsets in session id at epoch, MaxWait 0.
func sessionFetch(topic string, id, epoch int32, offsets map[int32]int64) *kmsg.FetchRequest {
	req := brokertest.FetchRequest(topic, 0, 0, 0, 1, 1<<20, 1<<20)
	req.SessionID, req.SessionEpoch = id, epoch
	req.Topics[0].Partitions = nil
	for p := int32(0); p < 64; p++ {
		o, ok := offsets[p]
		if !ok {
			continue
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset = p, o, 1<<20, -1
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	if len(req.Topics[0].Partitions) == 0 {
		req.Topics = nil
	}
	return req
}

// answered lists the partitions a fetch answer carries, as "p:records".
func answered(resp *kmsg.FetchResponse) string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			s := fmt.Sprintf("%d:%d", p.Partition, len(p.RecordBatches))
			if p.ErrorCode != 0 {
				s = fmt.Sprintf("%d:%s", p.Partition, kerr.ErrorForCode(p.ErrorCode).(*kerr.Error).Message)
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

func expectSessionAnswer(t *testing.T, resp *kmsg.FetchResponse, code int16, id int32) {
	t.Helper()
	if resp.ErrorCode != code || resp.SessionID != id {
		t.Fatalf("answer: %v, session %d; want %v, session %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID, kerr.ErrorForCode(code), id)
	}
}

// TestFetchSessionLifecycle walks one session: created by a full fetch;
// an incremental fetch answers only partitions with news (records, a new
// high watermark) and keeps the ones it left out; a repeated epoch,
// an unknown id and a switch to topic ids are refused with Apache's
// codes; forgetting every partition ends the session; epoch -1 closes it.
func TestFetchSessionLifecycle(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "s", 3, nil)
	c := brokertest.Dial(t, b.Addr())
	c.RoundTrip(brokertest.ProduceRequest("s", 0, 1, brokertest.Batch("a")))

	full := c.RoundTrip(sessionFetch("s", 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0})).(*kmsg.FetchResponse)
	id := full.SessionID
	if full.ErrorCode != 0 || id == 0 {
		t.Fatalf("full fetch: %v, session %d; want a new session", kerr.ErrorForCode(full.ErrorCode), id)
	}
	if got := answered(full); !strings.HasPrefix(got, "0:") || strings.HasPrefix(got, "0:0") || !strings.Contains(got, "1:0 2:0") {
		t.Fatalf("full fetch answered %q, want the batch of partition 0 and partitions 1, 2 empty", got)
	}
	if v := metric(t, b, "kaas_fetch_sessions"); v != 1 {
		t.Fatalf("kaas_fetch_sessions %v, want 1", v)
	}
	if v := metric(t, b, "kaas_fetch_session_partitions"); v != 3 {
		t.Fatalf("kaas_fetch_session_partitions %v, want 3", v)
	}

	// Epoch 1 moves partition 0 past its batch; nothing is new.
	resp := c.RoundTrip(sessionFetch("s", id, 1, map[int32]int64{0: 1})).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, 0, id)
	if got := answered(resp); got != "" {
		t.Fatalf("incremental fetch with nothing new answered %q", got)
	}
	// A record on partition 2: only partition 2 comes back, found at the
	// offset the session remembers.
	c.RoundTrip(brokertest.ProduceRequest("s", 2, 1, brokertest.Batch("b")))
	resp = c.RoundTrip(sessionFetch("s", id, 2, nil)).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, 0, id)
	if got := answered(resp); !strings.HasPrefix(got, "2:") || got == "2:0" || strings.Contains(got, " ") {
		t.Fatalf("incremental fetch after a record on partition 2 answered %q", got)
	}

	// The same epoch again (a duplicate request) and unknown ids.
	resp = c.RoundTrip(sessionFetch("s", id, 2, nil)).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, kerr.InvalidFetchSessionEpoch.Code, 0)
	if len(resp.Topics) != 0 {
		t.Fatalf("a session error carries partitions: %q", answered(resp))
	}
	resp = c.RoundTrip(sessionFetch("s", id+1, 1, nil)).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, kerr.FetchSessionIDNotFound.Code, 0)
	resp = c.RoundTrip(sessionFetch("s", 0, 5, nil)).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, kerr.FetchSessionIDNotFound.Code, 0)
	// v13 addresses topics by id: a session of v12 fetches cannot.
	v13 := sessionFetch("s", id, 3, nil)
	v13.SetVersion(13)
	resp = c.RoundTrip(v13).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, kerr.FetchSessionTopicIDError.Code, 0)

	// Forgetting every partition ends the session: the fetch is answered
	// sessionless (the partitions it names, none) with session id 0.
	forget := sessionFetch("s", id, 3, nil)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.Partitions = "s", []int32{0, 1, 2}
	forget.ForgottenTopics = append(forget.ForgottenTopics, ft)
	resp = c.RoundTrip(forget).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, 0, 0)
	brokertest.Eventually(t, 5*time.Second, "the session to be gone", func() bool { return metric(t, b, "kaas_fetch_sessions") == 0 })
	resp = c.RoundTrip(sessionFetch("s", id, 4, nil)).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, kerr.FetchSessionIDNotFound.Code, 0)

	// Epoch -1 closes the session it names and creates none.
	id = c.RoundTrip(sessionFetch("s", 0, 0, map[int32]int64{0: 0})).(*kmsg.FetchResponse).SessionID
	resp = c.RoundTrip(sessionFetch("s", id, -1, map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, 0, 0)
	if got := answered(resp); strings.HasPrefix(got, "0:0") {
		t.Fatalf("sessionless fetch answered %q, want partition 0's batch", got)
	}
	resp = c.RoundTrip(sessionFetch("s", id, 1, nil)).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, kerr.FetchSessionIDNotFound.Code, 0)
}

// TestFetchSessionTopicIDs: a v13 session names partitions by topic id,
// and an id nobody knows stays in it, answered UNKNOWN_TOPIC_ID on every
// fetch (a partition with an error is always sent).
func TestFetchSessionTopicIDs(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "ids", 2, nil)
	c := brokertest.Dial(t, b.Addr())
	md := c.RoundTrip(func() kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		r.SetVersion(12)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("ids")
		r.Topics = append(r.Topics, rt)
		return r
	}()).(*kmsg.MetadataResponse)
	topicID := md.Topics[0].TopicID

	req := sessionFetch("", 0, 0, map[int32]int64{0: 0, 1: 0})
	req.SetVersion(13)
	req.Topics[0].TopicID = topicID
	unknown := kmsg.NewFetchRequestTopic()
	unknown.TopicID = [16]byte{1, 2, 3}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	unknown.Partitions = append(unknown.Partitions, rp)
	req.Topics = append(req.Topics, unknown)
	full := c.RoundTrip(req).(*kmsg.FetchResponse)
	if full.SessionID == 0 || answered(full) != "0:0 1:0 0:"+kerr.UnknownTopicID.Message {
		t.Fatalf("v13 full fetch: session %d, answered %q", full.SessionID, answered(full))
	}
	c.RoundTrip(brokertest.ProduceRequest("ids", 1, 1, brokertest.Batch("x")))
	inc := sessionFetch("", full.SessionID, 1, nil)
	inc.SetVersion(13)
	resp := c.RoundTrip(inc).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, 0, full.SessionID)
	if got := answered(resp); !strings.HasPrefix(got, "1:") || strings.HasPrefix(got, "1:0") || !strings.HasSuffix(got, " 0:"+kerr.UnknownTopicID.Message) {
		t.Fatalf("v13 incremental fetch answered %q, want partition 1's batch and the unknown id's error", got)
	}
	if resp.Topics[0].TopicID != topicID {
		t.Fatalf("answer names topic id %x, want %x", resp.Topics[0].TopicID, topicID)
	}
}

// TestFetchSessionEviction: with one slot, a second fetcher's full fetch
// gets no session while the first is fresh (Apache's eviction rules), and
// takes the slot once the first has gone unused longer than the eviction
// time; the first fetcher's next incremental fetch is then
// FETCH_SESSION_ID_NOT_FOUND. Evictions are counted.
func TestFetchSessionEviction(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *broker.Config) {
		c.FetchSessionSlots = 1
		c.FetchSessionEviction = 300 * time.Millisecond
	}))
	brokertest.CreateTopic(t, b.Addr(), "ev", 2, nil)
	c := brokertest.Dial(t, b.Addr())
	first := c.RoundTrip(sessionFetch("ev", 0, 0, map[int32]int64{0: 0, 1: 0})).(*kmsg.FetchResponse).SessionID
	if first == 0 {
		t.Fatal("no session for the first fetcher")
	}
	// A fresh session is not evictable by a consumer's session, even a
	// larger one; the first fetcher keeps using it meanwhile.
	if id := c.RoundTrip(sessionFetch("ev", 0, 0, map[int32]int64{0: 0, 1: 0})).(*kmsg.FetchResponse).SessionID; id != 0 && metric(t, b, "kaas_fetch_session_evictions_total") == 0 {
		t.Fatalf("second fetcher got session %d with the only slot taken by a fresh session", id)
	}
	var second int32
	brokertest.Eventually(t, 20*time.Second, "the stale session to be evicted", func() bool {
		second = c.RoundTrip(sessionFetch("ev", 0, 0, map[int32]int64{0: 0})).(*kmsg.FetchResponse).SessionID
		return second != 0
	})
	if second == first {
		t.Fatalf("new session reused id %d", first)
	}
	resp := c.RoundTrip(sessionFetch("ev", first, 1, nil)).(*kmsg.FetchResponse)
	expectSessionAnswer(t, resp, kerr.FetchSessionIDNotFound.Code, 0)
	if v := metric(t, b, "kaas_fetch_session_evictions_total"); v < 1 {
		t.Fatalf("kaas_fetch_session_evictions_total %v, want the eviction counted", v)
	}
	if v := metric(t, b, "kaas_fetch_sessions"); v != 1 {
		t.Fatalf("kaas_fetch_sessions %v, want 1 (the cap)", v)
	}
}

// sessionHook counts the Fetch answers a client reads and their bytes.
type sessionHook struct{ fetches, bytes atomic.Int64 }

func (h *sessionHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, _ error) {
	if key == 1 {
		h.fetches.Add(1)
		h.bytes.Add(int64(n))
	}
}

// TestFetchSessionKgoConsumer: a franz-go consumer of 200 partitions gets
// every record through one session (one slot, all 200 partitions cached),
// and once caught up its fetches are incremental: an answer naming no
// partition is a few dozen bytes where a full one names all 200.
func TestFetchSessionKgoConsumer(t *testing.T) {
	b := brokertest.Start(t)
	const parts, records = 200, 2000
	brokertest.CreateTopic(t, b.Addr(), "kgo-sessions", parts, nil)
	ctx := brokertest.Context(t, time.Minute)
	p := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("kgo-sessions"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			p.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, records/2)

	h := &sessionHook{}
	cons := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics("kgo-sessions"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.WithHooks(h))
	seen := map[string]bool{}
	consume := func(want int) {
		for len(seen) < want {
			fs := cons.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("after %d records: %v", len(seen), err)
			}
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
	}
	consume(records / 2)
	if v := metric(t, b, "kaas_fetch_sessions"); v != 1 {
		t.Fatalf("kaas_fetch_sessions %v, want 1", v)
	}
	if v := metric(t, b, "kaas_fetch_session_partitions"); v != parts {
		t.Fatalf("kaas_fetch_session_partitions %v, want %d", v, parts)
	}
	// Caught up: the long polls that time out answer no partition.
	before, beforeBytes := h.fetches.Load(), h.bytes.Load()
	brokertest.Eventually(t, 20*time.Second, "a few idle fetches", func() bool { return h.fetches.Load() >= before+3 })
	if idle := (h.bytes.Load() - beforeBytes) / (h.fetches.Load() - before); idle > 100 {
		t.Fatalf("idle fetch answers average %d bytes: not incremental (a full answer names all %d partitions)", idle, parts)
	}
	produce(records/2, records)
	consume(records)
	if len(seen) != records {
		t.Fatalf("consumed %d distinct records, want %d", len(seen), records)
	}
}
