package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func isolationOpt(iso string) kgo.IsolationLevel {
	if iso == ReadCommitted {
		return kgo.ReadCommitted()
	}
	return kgo.ReadUncommitted()
}

func toRecs(rs []*kgo.Record) []Rec {
	out := make([]Rec, len(rs))
	for i, r := range rs {
		out[i] = Rec{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)}
	}
	return out
}

// runReader consumes every topic from the start at one isolation level
// until ctx ends, recording what each poll returned: a record a consumer
// was given must never be taken back.
func (c *cluster) runReader(ctx context.Context, iso string) {
	name := "reader-" + iso
	cl, err := kgo.NewClient(append(c.clientOpts(2*time.Second, name),
		kgo.ConsumeTopics(slices.Sorted(maps.Keys(topics))...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(isolationOpt(iso)), kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if rs := fs.Records(); len(rs) > 0 {
			c.rec.Note(Event{Process: name, Type: OK, F: Poll, Isolation: iso, Recs: toRecs(rs)})
		}
	}
}

// settle waits, until the deadline, for no transaction to be open and
// for every partition's last stable offset to reach its high watermark
// (a transaction whose client gave up is aborted after its timeout), and
// returns what it last saw.
func (c *cluster) settle(ctx context.Context, within time.Duration) (open []string, hw, lso map[tp]int64, err error) {
	adm, err := c.admin(3 * time.Second)
	if err != nil {
		return nil, nil, nil, err
	}
	defer adm.Close()
	deadline := time.Now().Add(within)
	for {
		open, hw, lso, err = observe(ctx, adm)
		settled := err == nil && len(open) == 0
		for k, h := range hw {
			settled = settled && lso[k] >= h
		}
		if settled || time.Now().After(deadline) || ctx.Err() != nil {
			return open, hw, lso, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func observe(ctx context.Context, adm *kadm.Client) (open []string, hw, lso map[tp]int64, err error) {
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	names := slices.Sorted(maps.Keys(topics))
	ends, err := adm.ListEndOffsets(octx, names...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("high watermarks: %w", err)
	}
	stable, err := adm.ListCommittedOffsets(octx, names...)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("last stable offsets: %w", err)
	}
	hw, lso = map[tp]int64{}, map[tp]int64{}
	ends.Each(func(o kadm.ListedOffset) { hw[tp{o.Topic, o.Partition}] = o.Offset })
	stable.Each(func(o kadm.ListedOffset) { lso[tp{o.Topic, o.Partition}] = o.Offset })
	txns, err := adm.ListTransactions(octx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort"})
	if err != nil {
		return nil, hw, lso, fmt.Errorf("list transactions: %w", err)
	}
	// A transaction the coordinators call complete can still hang in a
	// group: offsets staged by TxnOffsetCommit that no marker resolved
	// (a consumer then gets UNSTABLE_OFFSET_COMMIT for ever).
	gctx := kadm.RequireStable(octx)
	if offs, err := adm.FetchOffsets(gctx, eosGroup); err == nil {
		offs.Each(func(o kadm.OffsetResponse) {
			if errors.Is(o.Err, kerr.UnstableOffsetCommit) {
				open = append(open, fmt.Sprintf("group %s %s/%d: %v", eosGroup, o.Topic, o.Partition, o.Err))
			}
		})
	}
	var ids []string
	for _, t := range txns.Sorted() {
		ids = append(ids, t.TxnID)
	}
	if len(ids) == 0 {
		return open, hw, lso, nil
	}
	described, err := adm.DescribeTransactions(octx, ids...)
	for _, id := range ids {
		d, ok := described[id]
		if err != nil || !ok {
			open = append(open, id+" "+txns[id].State)
			continue
		}
		open = append(open, fmt.Sprintf("%s %s producer %d/%d started %s timeout %dms partitions %v", id, d.State, d.ProducerID, d.ProducerEpoch,
			time.UnixMilli(d.StartTimestamp).Format("15:04:05.000"), d.TimeoutMillis, d.Topics))
	}
	return open, hw, lso, nil
}

// writeSentinels produces one record to the end of every partition —
// all partitions at once, each retried until acknowledged or the deadline,
// so that one stuck partition costs no other its sentinel — and returns,
// per partition, the value acknowledged: the final read stops there. They
// are sends in the history like any other.
func (c *cluster) writeSentinels(ctx context.Context, within time.Duration) map[tp]string {
	w := &worker{c: c, rec: c.rec, name: "sentinel"}
	cl, err := kgo.NewClient(c.clientOpts(3*time.Second, "sentinel")...)
	if err != nil {
		return nil
	}
	defer cl.Close()
	var mu sync.Mutex
	out := map[tp]string{}
	deadline := time.Now().Add(within)
	var wg sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		for p := range topics[name] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for attempt := 0; time.Now().Before(deadline) && ctx.Err() == nil; attempt++ {
					v := sentinelValue(name, p, attempt)
					done := make(chan error, 1)
					w.send(cl, "", name, p, v, func(err error) { done <- err })
					if <-done == nil {
						mu.Lock()
						out[tp{name, p}] = v
						mu.Unlock()
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	return out
}

// finalRead reads every partition from its start at one isolation level
// until it has seen the partition's sentinel, or the deadline.
func (c *cluster) finalRead(ctx context.Context, iso string, sentinels map[tp]string, within time.Duration) []PartitionRead {
	parts := map[string]map[int32]kgo.Offset{}
	for name, n := range topics {
		parts[name] = map[int32]kgo.Offset{}
		for p := range n {
			parts[name][p] = kgo.NewOffset().AtStart()
		}
	}
	reads := map[tp]*PartitionRead{}
	for name, n := range topics {
		for p := range n {
			reads[tp{name, p}] = &PartitionRead{Topic: name, Partition: p, Isolation: iso}
		}
	}
	cl, err := kgo.NewClient(append(c.clientOpts(3*time.Second, "final-"+iso),
		kgo.ConsumePartitions(parts), kgo.FetchIsolationLevel(isolationOpt(iso)), kgo.FetchMaxWait(500*time.Millisecond))...)
	if err == nil {
		defer cl.Close()
		deadline := time.Now().Add(within)
		left := len(reads)
		for left > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			fs := cl.PollFetches(pctx)
			cancel()
			fs.EachError(func(topic string, p int32, err error) {
				if r := reads[tp{topic, p}]; r != nil && err != context.DeadlineExceeded {
					r.Err = err.Error()
				}
			})
			fs.EachRecord(func(rec *kgo.Record) {
				r := reads[tp{rec.Topic, rec.Partition}]
				if r == nil || r.Complete {
					return
				}
				r.Records = append(r.Records, Rec{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Value: string(rec.Value)})
				if s, ok := sentinels[tp{rec.Topic, rec.Partition}]; ok && s == string(rec.Value) {
					r.Complete = true
					left--
				}
			})
		}
	}
	out := make([]PartitionRead, 0, len(reads))
	for _, k := range sortedTPs(reads) {
		r := reads[k]
		if _, ok := sentinels[k]; !ok && r.Err == "" {
			r.Err = "no sentinel was acknowledged"
		}
		out = append(out, *r)
	}
	return out
}

// groupOffsets are the exactly-once group's committed offsets.
func (c *cluster) groupOffsets(ctx context.Context) ([]Rec, error) {
	adm, err := c.admin(3 * time.Second)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	var last error
	for range 20 {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := adm.FetchOffsets(octx, eosGroup)
		cancel()
		if err == nil {
			err = resp.Error()
		}
		if err == nil {
			var out []Rec
			resp.Each(func(o kadm.OffsetResponse) {
				if o.At >= 0 {
					out = append(out, Rec{Topic: o.Topic, Partition: o.Partition, Offset: o.At})
				}
			})
			slices.SortFunc(out, func(a, b Rec) int { return int(a.Partition - b.Partition) })
			return out, nil
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	return nil, last
}
