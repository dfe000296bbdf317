package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The compact scenario: keyed records at full rate to a compacted topic
// (10,000 keys, 1 MiB segments, min.cleanable.dirty.ratio 0.1) while the
// cleaner runs (log.cleaner.backoff.ms 200), against the same workload
// on the same compacted topic with the cleaner off (kaas-nocleaner: the
// cleaner's cost alone; both validate that every record has a key) and
// on kfake. The kaas side notes what its cleaner did in the window.

// sideNoClean is a kaas broker whose cleaner never checks (backoff of a
// day): the same produce to the same compacted topic, no cleaning.
const sideNoClean = "kaas-nocleaner"

func init() {
	register(&Scenario{
		Name:     "compact",
		About:    "one franz-go producer at full rate, acks=all, 10,000 keys, on a compacted topic with the cleaner running (kaas), with the cleaner off (kaas-nocleaner), and on kfake (goal: kaas ≥ 0.9× kaas-nocleaner)",
		Headline: "records", Latency: "ack",
		Sides:     []string{"kaas", sideNoClean, "kfake"},
		Reference: sideNoClean,
		Run:       produceCompacted,
	})
}

const compactKeys = 10000

func produceCompacted(ctx context.Context, e *Env) error {
	topic := uniqueTopic("bench-compact")
	cl, err := e.client(append(producerOpts(e, topic), kgo.DisableIdempotentWrite())...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	sctx, cancel := withSetupTimeout(ctx, e.Opts)
	defer cancel()
	backoff := map[string]string{"kaas": "200", sideNoClean: "86400000"}
	if b, ok := backoff[e.Side]; ok {
		if _, err := adm.AlterBrokerConfigs(sctx, []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: strPtr(b)}}); err != nil {
			return fmt.Errorf("setting the cleaner's backoff: %w", err)
		}
	}
	resp, err := adm.CreateTopic(sctx, int32(e.Opts.Partitions), 1, map[string]*string{
		"cleanup.policy": strPtr("compact"), "segment.bytes": strPtr("1048576"), "min.cleanable.dirty.ratio": strPtr("0.1"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	if err := e.createTopic(sctx, topic, e.Opts.Partitions); err != nil { // waits for its leaders
		return err
	}
	value, err := payloads(e.Opts.Payload, e.Opts.RecordSize)
	if err != nil {
		return err
	}
	key := func(i int) []byte { return []byte("key-" + strconv.Itoa(i%compactKeys)) }
	if err := cl.ProduceSync(sctx, &kgo.Record{Key: key(0), Value: value(0)}).FirstErr(); err != nil {
		return fmt.Errorf("first produce: %w", err)
	}
	before := cleanerCounters(e)
	var fail firstError
	e.Begin()
	start := time.Now()
	for i := 0; e.Running() && fail.get() == nil && ctx.Err() == nil; i++ {
		t0 := time.Now()
		cl.Produce(ctx, &kgo.Record{Key: key(i), Value: value(i)}, func(r *kgo.Record, err error) {
			if err != nil {
				fail.set(err)
				return
			}
			e.Rec.Op(1, int64(len(r.Value)+len(r.Key)), time.Since(t0))
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if after := cleanerCounters(e); after.ok && e.Side == "kaas" {
		secs := time.Since(start).Seconds()
		read := after.read - before.read
		e.Note("kaas-side cleaner in the window: %d passes, %.1f MB read (%.1f MB/s), %.1f MB written, %d records removed",
			int64(after.passes-before.passes), read/1e6, read/1e6/secs, (after.written-before.written)/1e6, int64(after.removed-before.removed))
	}
	return fail.get()
}

func strPtr(s string) *string { return &s }

type cleanerCount struct {
	ok                             bool
	passes, read, written, removed float64
}

// cleanerCounters reads an in-process kaas's cleaner counters.
func cleanerCounters(e *Env) cleanerCount {
	if e.Target == nil || e.Target.Metrics == nil {
		return cleanerCount{}
	}
	fams, err := e.Target.Metrics.Registry.Gather()
	if err != nil {
		return cleanerCount{}
	}
	c := cleanerCount{ok: true}
	for _, f := range fams {
		if len(f.Metric) == 0 || f.Metric[0].Counter == nil {
			continue
		}
		v := f.Metric[0].Counter.GetValue()
		switch f.GetName() {
		case "kaas_log_cleaner_passes_total":
			c.passes = v
		case "kaas_log_cleaner_bytes_read_total":
			c.read = v
		case "kaas_log_cleaner_bytes_written_total":
			c.written = v
		case "kaas_log_cleaner_records_removed_total":
			c.removed = v
		}
	}
	return c
}
