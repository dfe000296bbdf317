package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The compact scenario measures what the log cleaner costs the produce
// path. One kaas broker holds two compacted topics (--partitions each,
// 1 MiB segments) and one franz-go producer writes keyed records (10,000
// keys) at full rate, acks=all. The measured time is cut into pairs of
// slices (--duration / 5 each, at least 250 ms), one of each condition,
// their order alternating from pair to pair:
//   - kaas: the records go to the topic the cleaner cleans
//     (min.cleanable.dirty.ratio 0.1, log.cleaner.backoff.ms 200, no
//     log.cleaner.io.max.bytes.per.second limit);
//   - kaas-nocleaner: they go to a topic it never cleans
//     (min.compaction.lag.ms of a day), and the throughput limit is one
//     byte a second, which stops a pass of the first topic where it is
//     until the next kaas slice lifts it (a throttled pass wakes when the
//     limit changes): the same produce path, keys validated alike, and
//     no cleaning.
// Both conditions thus share the machine's load as it swings, which one
// side after the other on shared cores did not (0.53–1.33× between
// repetitions). The cleaner cleans in kaas slices only what kaas slices
// produced, as much as it would running all along. The per-pair ratios
// are noted beside the run's. kfake runs the same produce on one topic.

// sideNoClean is the kaas side's companion: its slices without cleaning.
const sideNoClean = "kaas-nocleaner"

func init() {
	register(&Scenario{
		Name: "compact",
		About: "one franz-go producer at full rate, acks=all, 10,000 keys, on one kaas broker: slices of produce to a compacted topic " +
			"with the cleaner running (kaas) alternate with slices to a compacted topic it never cleans, the cleaner paused " +
			"(kaas-nocleaner), so both see the same load; and on kfake (goal: kaas ≥ 0.9× kaas-nocleaner)",
		Headline: "records", Latency: "ack",
		Sides:     []string{"kaas", "kfake"},
		Companion: sideNoClean,
		Reference: sideNoClean,
		Run:       produceCompacted,
	})
}

const compactKeys = 10000

// The kaas side's broker configs per condition: the cleaner running
// unthrottled, or its passes held by a limit of one byte a second.
var (
	cleanerOn  = []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: strPtr("200")}, {Name: "log.cleaner.io.max.bytes.per.second", Value: strPtr(strconv.FormatFloat(math.MaxFloat64, 'g', -1, 64))}}
	cleanerOff = []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: strPtr("200")}, {Name: "log.cleaner.io.max.bytes.per.second", Value: strPtr("1")}}
)

func produceCompacted(ctx context.Context, e *Env) error {
	cl, err := e.client(append(producerOpts(e, ""), kgo.DisableIdempotentWrite())...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	sctx, cancel := withSetupTimeout(ctx, e.Opts)
	defer cancel()
	sliced := e.CompanionRec() != nil
	cleaned := uniqueTopic("bench-compact")
	topics := []string{cleaned}
	var uncleaned string
	if sliced {
		uncleaned = uniqueTopic("bench-compact-uncleaned")
		topics = append(topics, uncleaned)
		if err := alterBroker(sctx, adm, cleanerOff); err != nil {
			return err
		}
	}
	for _, topic := range topics {
		cfg := map[string]*string{"cleanup.policy": strPtr("compact"), "segment.bytes": strPtr("1048576"), "min.cleanable.dirty.ratio": strPtr("0.1")}
		if topic == uncleaned {
			cfg["min.compaction.lag.ms"] = strPtr("86400000")
		}
		resp, err := adm.CreateTopic(sctx, int32(e.Opts.Partitions), 1, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating topic %s: %w", topic, err)
		}
		if err := e.createTopic(sctx, topic, e.Opts.Partitions); err != nil { // waits for its leaders
			return err
		}
	}
	value, err := payloads(e.Opts.Payload, e.Opts.RecordSize)
	if err != nil {
		return err
	}
	key := func(i int) []byte { return []byte("key-" + strconv.Itoa(i%compactKeys)) }
	for _, topic := range topics {
		if err := cl.ProduceSync(sctx, &kgo.Record{Topic: topic, Key: key(0), Value: value(0)}).FirstErr(); err != nil {
			return fmt.Errorf("first produce: %w", err)
		}
	}

	// The producer loop runs on this goroutine, the slices are switched
	// on another; a record's ack counts for the slice it arrives in.
	type slice struct {
		topic string
		rec   *Recorder
	}
	onSlice := &slice{cleaned, e.Rec}
	var cur atomic.Pointer[slice]
	cur.Store(onSlice)
	var fail firstError
	before := cleanerCounters(e)
	e.Begin()
	done := make(chan pairRates, 1)
	if sliced {
		offSlice := &slice{uncleaned, e.CompanionRec()}
		go func() {
			done <- alternate(ctx, e, adm, func(on bool) {
				s := offSlice
				if on {
					s = onSlice
				}
				cur.Store(s)
				e.Slice(!on)
			})
		}()
	}
	running := func() bool {
		if !sliced {
			return e.Running()
		}
		select {
		case pr := <-done:
			done <- pr
			return false
		default:
			return true
		}
	}
	for i := 0; running() && fail.get() == nil && ctx.Err() == nil; i++ {
		t0 := time.Now()
		cl.Produce(ctx, &kgo.Record{Topic: cur.Load().topic, Key: key(i), Value: value(i)}, func(r *kgo.Record, err error) {
			if err != nil {
				fail.set(err)
				return
			}
			cur.Load().rec.Op(1, int64(len(r.Value)+len(r.Key)), time.Since(t0))
		})
	}
	if !sliced {
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		return fail.get()
	}
	pr := <-done // the slices are over, measuring ended
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if pr.err != nil {
		return pr.err
	}
	e.Note("%d pairs of %v slices, order alternating; kaas/kaas-nocleaner records/s per pair %s", len(pr.ratios), pr.slice, spread(pr.ratios))
	if after := cleanerCounters(e); after.ok {
		read := after.read - before.read
		e.Note("kaas-side cleaner in the kaas slices: %d passes, %.1f MB read (%.1f MB/s of the slices), %.1f MB written, %d records removed",
			int64(after.passes-before.passes), read/1e6, read/1e6/pr.onTime.Seconds(), (after.written-before.written)/1e6, int64(after.removed-before.removed))
	}
	return fail.get()
}

// pairRates is how alternate ended: the kaas/kaas-nocleaner rate of each
// pair of slices, the kaas slices' time, or the error that stopped them.
type pairRates struct {
	slice  time.Duration
	ratios []float64
	onTime time.Duration
	err    error
}

// alternate runs the slices, each condition --duration in all: it sets
// the broker's cleaner configs for the condition, then begin(on)
// starts its slice (on: kaas). It ends measuring and lifts the
// throttle, so that no pass stays held.
func alternate(ctx context.Context, e *Env, adm *kadm.Client, begin func(on bool)) (out pairRates) {
	out.slice = max(e.Opts.Duration/5, 250*time.Millisecond)
	pairs := max(int((e.Opts.Duration+out.slice-1)/out.slice), 1)
	recs := map[bool]*Recorder{true: e.Rec, false: e.CompanionRec()}
	defer func() {
		out.onTime, _ = e.Rec.active()
		e.EndMeasuring()
		if err := alterBroker(ctx, adm, cleanerOn); err != nil && out.err == nil {
			out.err = err
		}
	}()
	for p := 0; p < pairs && ctx.Err() == nil; p++ {
		rate := map[bool]float64{}
		for _, on := range []bool{p%2 == 0, p%2 != 0} {
			cfg := cleanerOff
			if on {
				cfg = cleanerOn
			}
			if err := alterBroker(ctx, adm, cfg); err != nil {
				out.err = fmt.Errorf("switching the cleaner: %w", err)
				return out
			}
			begin(on)
			r := recs[on]
			n0, t0 := r.records.Load(), activeTime(r)
			select {
			case <-time.After(out.slice):
			case <-ctx.Done():
			}
			rate[on] = float64(r.records.Load()-n0) / (activeTime(r) - t0).Seconds()
		}
		if rate[false] > 0 {
			out.ratios = append(out.ratios, rate[true]/rate[false])
		}
	}
	return out
}

func activeTime(r *Recorder) time.Duration {
	d, _ := r.active()
	return d
}

func alterBroker(ctx context.Context, adm *kadm.Client, cfg []kadm.AlterConfig) error {
	resp, err := adm.AlterBrokerConfigs(ctx, cfg)
	if err == nil && len(resp) > 0 {
		err = resp[0].Err
	}
	if err != nil {
		names := make([]string, len(cfg))
		for i, c := range cfg {
			names[i] = c.Name + "=" + *c.Value
		}
		sort.Strings(names)
		return fmt.Errorf("setting %s: %w", strings.Join(names, ", "), err)
	}
	return nil
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
