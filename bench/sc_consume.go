package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register(&Scenario{
		Name:     "consume",
		About:    "one franz-go consumer reading a pre-filled topic from the start, again each time it has every record, for the duration",
		Headline: "records", Latency: "poll",
		Run: consumeAll,
	})
	register(&Scenario{
		Name:     "e2e",
		About:    "end-to-end latency at a fixed produce rate (--rate): produce call to the consumer holding the record",
		Headline: "records", Latency: "end-to-end",
		Run: endToEnd,
	})
}

// consumeAll pre-fills a topic (not measured), then measures one consumer
// reading it from the start for the whole duration: once it has every
// record it starts again from the first offset (a pass), so the measured
// window is the duration on both sides. An op is one PollFetches that
// returned records.
//
// Why passes: read once, the pre-filled million records (all the data
// kfake can hold comfortably: it keeps every record in the heap) took
// 0.4–0.6 s to read over 6 partitions and two or three fetches over 1,000,
// so the ratio swung 0.6–1.2× from run to run. A new pass sets every
// partition's offset back to 0 (SetOffsets), which ends the client's
// fetch session and the connection its last fetch was waiting on; both
// sides pay that equally once a pass.
func consumeAll(ctx context.Context, e *Env) error {
	topic := uniqueTopic("bench-consume")
	if err := e.createTopic(ctx, topic, e.Opts.Partitions); err != nil {
		return err
	}
	total := fillCount(e.Opts.Duration, 200_000, 20_000, 3_000_000)
	if err := e.fill(ctx, topic, total, e.Opts.RecordSize); err != nil {
		return err
	}
	fetches := &requestTimer{key: 1}
	cl, err := e.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(shortPoll), kgo.WithHooks(fetches))
	if err != nil {
		return err
	}
	defer cl.Close()
	fromStart := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p := range int32(e.Opts.Partitions) {
		fromStart[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: 0}
	}
	writes0 := answerWrites(e)
	e.Begin()
	passes := 0
	for got := 0; e.Running(); {
		start := time.Now()
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("pass %d, after %d of %d records: %w", passes+1, got, total, err)
		}
		var n, bytes int64
		fs.EachRecord(func(r *kgo.Record) { n++; bytes += int64(len(r.Value)) })
		if n > 0 {
			e.Rec.Op(n, bytes, time.Since(start))
		}
		if got += int(n); got > total {
			return fmt.Errorf("pass %d read %d records, %d were produced", passes+1, got, total)
		}
		if got == total {
			passes++
			got = 0
			cl.SetOffsets(fromStart)
		}
	}
	e.EndMeasuring()
	e.Note("%d records pre-filled, %d whole passes read in the measured window", total, passes)
	fetches.noteBytes(e, "Fetch")
	answerWritesNote(e, writes0)
	return nil
}

// endToEnd produces at --rate records/s (paced every millisecond) while one
// consumer reads; each record carries its send time.
func endToEnd(ctx context.Context, e *Env) error {
	topic := uniqueTopic("bench-e2e")
	if err := e.createTopic(ctx, topic, e.Opts.Partitions); err != nil {
		return err
	}
	size := max(e.Opts.RecordSize, 8)
	prod, err := e.client(producerOpts(e, topic)...)
	if err != nil {
		return err
	}
	defer prod.Close()
	cons, err := e.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(shortPoll))
	if err != nil {
		return err
	}
	defer cons.Close()

	var fail firstError
	var sent, received atomic.Int64
	consumed := make(chan error, 1)
	cctx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	go func() {
		for cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			if err := fs.Err0(); err != nil && !errors.Is(err, context.Canceled) {
				consumed <- err
				return
			}
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				at := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
				e.Rec.Op(1, int64(len(r.Value)), now.Sub(at))
				received.Add(1)
			})
		}
		consumed <- nil
	}()

	e.Begin()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for e.Running() && fail.get() == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-consumed:
			return fmt.Errorf("consumer: %w", err)
		case now := <-tick.C:
			due := int64(now.Sub(start).Seconds() * float64(e.Opts.Rate))
			for sent.Load() < due {
				v := make([]byte, size)
				binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
				sent.Add(1)
				prod.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) { fail.set(err) })
			}
		}
	}
	if err := prod.Flush(ctx); err != nil {
		return err
	}
	if err := fail.get(); err != nil {
		return err
	}
	// Let the consumer catch up with what was sent.
	for deadline := time.Now().Add(10 * time.Second); received.Load() < sent.Load(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("consumer got %d of %d records", received.Load(), sent.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopConsumer()
	serverLatencyNote(e, "Produce")
	return <-consumed
}
