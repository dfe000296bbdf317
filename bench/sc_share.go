package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register(&Scenario{
		Name:     "share",
		About:    "one franz-go share consumer (KIP-932) reading a pre-filled partition, accepting every record, its acknowledgements sent by the client as it goes (fsynced on kaas); latency sampled on 1 poll in 16 that waits for them",
		Headline: "records", Latency: "poll to acknowledged",
		Params: func(o *Options) string {
			return fmt.Sprintf("%d B records, 1 partition, 1 share consumer, %v", o.RecordSize, o.Duration)
		},
		Run: func(ctx context.Context, e *Env) error { return shareConsume(ctx, e, 1) },
	})
	register(&Scenario{
		Name:     "share-8",
		About:    "eight franz-go share consumers in one share group on one pre-filled partition, each accepting every record it gets",
		Headline: "records", Latency: "poll to acknowledged",
		Params: func(o *Options) string {
			return fmt.Sprintf("%d B records, 1 partition, 8 share consumers, %v", o.RecordSize, o.Duration)
		},
		Run: func(ctx context.Context, e *Env) error { return shareConsume(ctx, e, 8) },
	})
}

// shareFillBatchBytes caps the pre-fill's record batches at the Java
// producer's batch.size (16 KiB), so both sides hold the same batches.
// Uncapped (franz-go's 1 MB), the batches' size followed the broker's
// produce latency: a broker that fsyncs each produce got batches of
// ~7,000 records and one that does not far smaller ones, and a share
// fetch's cost follows its batches (whole batches go out; the client
// decodes all of each). With batches of more records than half the
// in-flight window (group.share.partition.max.record.locks, 2000), one
// acquisition fills it, and franz-go's next fetch, sent before the
// records are acknowledged, waits out its MaxWait on any broker that,
// as Apache's, waits at the limit.
const shareFillBatchBytes = 16 << 10

// shareLatencySample: a consumer's first poll, then one in this many, waits for its
// acknowledgements (FlushAcks) and is the scenario's latency sample. The
// others leave their acknowledgements to the client, which sends them on
// its own as an application's share consumer does (FlushAcks is for
// shutdown and for code that must know), so a broker's acknowledgement
// fsync overlaps the next fetch as it would in production. Waiting on
// every poll (as this scenario did until issue 25's stop 35) made each
// poll two round trips in a row, one holding the fsync: it measured a
// consumer nobody writes.
const shareLatencySample = 16

// shareConsume pre-fills one partition (not measured), points a new share
// group at its start (AlterShareGroupOffsets: both sides start share groups
// at the log end otherwise), then measures n share consumers accepting
// every record until all are read or the duration ends. The rate counts
// the records accepted, each consumer's last acknowledgements flushed
// inside the measured window; the latency is sampled on one poll in
// shareLatencySample, from the poll to its acknowledgements answered.
func shareConsume(ctx context.Context, e *Env, n int) error {
	topic := uniqueTopic("bench-share")
	if err := e.createTopic(ctx, topic, 1); err != nil {
		return err
	}
	// Enough records to outlast the measured window: at 100 k a second
	// of --duration, kaas read the whole fill in a tenth of it (770 k
	// records/s, load 1), so a run measured a fraction of a second and
	// one MaxWait of 500 ms halved its rate.
	total := fillCount(e.Opts.Duration, 1_000_000, 20_000, 4_000_000)
	if err := e.fillSpread(ctx, topic, total, e.Opts.RecordSize, 0, kgo.ProducerBatchMaxBytes(shareFillBatchBytes)); err != nil {
		return err
	}
	group := uniqueTopic("bench-share-group")
	admCl, err := e.client()
	if err != nil {
		return err
	}
	defer admCl.Close()
	var start kadm.Offsets
	start.AddOffset(topic, 0, 0, -1)
	if _, err := kadm.NewClient(admCl).AlterShareGroupOffsets(ctx, group, start); err != nil {
		return fmt.Errorf("starting the share group at offset 0: %w", err)
	}
	var consumers []*kgo.Client
	defer func() {
		for _, cl := range consumers {
			cl.Close()
		}
	}()
	for range n {
		cl, err := e.client(kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
		if err != nil {
			return err
		}
		consumers = append(consumers, cl)
	}
	var got, polls, sampled atomic.Int64
	var fail firstError
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	fsyncsBefore := readFsyncCounts(e)
	e.Begin()
	began := time.Now()
	var firstAt atomic.Int64 // when the first records came, after began
	var wg sync.WaitGroup
	for _, cl := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			flush := func(fctx context.Context) bool {
				if err := cl.FlushAcks(fctx); err != nil && !errors.Is(err, context.Canceled) {
					fail.set(err)
					return false
				}
				return true
			}
			// Whatever this consumer accepted is acknowledged inside the
			// measured window (the rate counts acknowledged records only),
			// also once the window is over or every record is read.
			defer func() {
				fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
				defer fcancel()
				flush(fctx)
			}()
			for n := 0; cctx.Err() == nil && e.Running() && got.Load() < int64(total); {
				t0 := time.Now()
				pctx, pcancel := context.WithTimeout(cctx, 500*time.Millisecond)
				fs := cl.PollFetches(pctx)
				pcancel()
				if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					fail.set(err)
					return
				}
				var recs, bytes int64
				for r := range fs.RecordsAll() {
					r.Ack(kgo.AckAccept)
					recs++
					bytes += int64(len(r.Value))
				}
				if recs == 0 {
					continue
				}
				firstAt.CompareAndSwap(0, int64(time.Since(began)))
				polls.Add(1)
				// The client sends a poll's acknowledgements on its own
				// (piggybacked on the next fetch, or a ShareAcknowledge),
				// as an application's share consumer does; one poll in
				// shareLatencySample waits for its acknowledgements to be
				// answered, the latency sample.
				// The sample is each consumer's first poll with records and
				// then every shareLatencySample-th: a short run (eight
				// consumers sharing a small fill) still measures some.
				if n++; n%shareLatencySample == 1 {
					if !flush(cctx) {
						return
					}
					e.Rec.Op(recs, bytes, time.Since(t0))
					sampled.Add(1)
				} else {
					e.Rec.Data(recs, bytes)
				}
				if got.Add(recs) >= int64(total) {
					stop()
				}
			}
		}()
	}
	wg.Wait()
	e.EndMeasuring()
	if err := fail.get(); err != nil {
		return err
	}
	e.Note("%d records pre-filled in batches of at most %d KiB, %d accepted and acknowledged in the measured window by %d share consumers, %.0f records a poll; latency from %d polls (1 in %d) that waited for their acknowledgements",
		total, shareFillBatchBytes>>10, got.Load(), n, float64(got.Load())/float64(max(1, polls.Load())), sampled.Load(), shareLatencySample)
	shareWindowNote(e, got.Load() >= int64(total), time.Duration(firstAt.Load()))
	for _, api := range []string{"ShareFetch", "ShareAcknowledge"} {
		serverLatencyNote(e, api)
	}
	// How a poll's acknowledgements travelled: franz-go piggybacks them on
	// the next fetch when they are ready as it builds it, else sends a
	// ShareAcknowledge of their own.
	if h := gatherHistogram(e, "kaas_request_duration_seconds", "api", "ShareAcknowledge"); h != nil {
		e.Note("%d ShareAcknowledge requests for %d polls", h.GetSampleCount(), polls.Load())
	}
	// A poll's acknowledgements wait for one fsync on kaas: the yardstick
	// for the sampled latency (docs/benchmarks.md), the share state log's
	// own fsyncs in the measured window next to the machine's.
	fsyncLatencyNote(e, fsyncsBefore)
	fsyncNote(e, 0)
	return nil
}

// shareWindowNote says what the rate is over. A side that reads the whole
// fill before --duration ends stops there, and its rate is the records
// over the time it took (Result.Elapsed ends at EndMeasuring, after the
// consumers' last acknowledgements), not over --duration: a fill that
// runs dry does not understate it. The window's fixed part — joining the
// share group until the first records come, the last FlushAcks — counts
// on both sides alike, and weighs more on a side whose window is shorter.
func shareWindowNote(e *Env, ranOut bool, first time.Duration) {
	if e.measured == nil {
		return
	}
	end := "--duration ended it"
	if ranOut {
		end = "the fill ran out first: the rate is over that time"
	}
	e.Note("measured window %v (%s); the first records came %v into it", e.measured.Elapsed.Round(time.Millisecond), end, first.Round(10*time.Microsecond))
}
