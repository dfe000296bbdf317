package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is one run.
type Config struct {
	// Binary is the kaas binary the brokers and etcd run.
	Binary string
	// Seed draws the nemesis's schedule and every workload's choices.
	Seed uint64
	// Duration is how long the faults go on.
	Duration time.Duration
	// Dir holds the run: data, etcd, every process's log, each client's
	// log, history.jsonl, final.json and summary.txt.
	Dir string
	// RequirePartitions makes a run that cannot build network namespaces
	// fail instead of running without partitions.
	RequirePartitions bool
	// Plant, for checking the checker end to end, changes the final read
	// before it is checked: "lost" drops the first acknowledged record
	// of an idempotent producer from it. Never the broker's data.
	Plant string
	// Logf reports progress (t.Logf, or stderr).
	Logf func(string, ...any)
}

// Result is what a run found.
type Result struct {
	Report Report
	// Partitions: the nemesis could partition; NoPartitions says why not.
	Partitions   bool
	NoPartitions string
	// Summary is the report's line, with the seed and the run's shape.
	Summary string
	Faults  []fault
	// History and Final are what the report was checked from.
	History []Event
	Final   Final
}

// Label is the summary line's head.
func (r *Result) label(cfg Config) string {
	parts := "partitions=on"
	if !r.Partitions {
		parts = "partitions=OFF (" + r.NoPartitions + ")"
	}
	return fmt.Sprintf("chaos seed=%d duration=%v %s", cfg.Seed, cfg.Duration, parts)
}

// Run runs one seed: a cluster, the workloads and the nemesis for
// cfg.Duration, then the settle, the final reads and the check. An error
// means the run could not be carried out (a failed start, an
// interrupt); anomalies are in the report.
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	res = &Result{}
	var nw *network
	if res.NoPartitions = partitionsUnavailable(); res.NoPartitions == "" {
		if nw, err = newNetwork(brokerCount); err != nil {
			res.NoPartitions = err.Error()
		}
	}
	if nw != nil {
		defer nw.close()
		res.Partitions = true
	} else {
		if cfg.RequirePartitions {
			return res, fmt.Errorf("network partitions required (KAAS_CHAOS_REQUIRE_PARTITIONS) but unavailable: %s", res.NoPartitions)
		}
		logf("WARNING: running WITHOUT network partitions: %s", res.NoPartitions)
	}
	res.Faults = schedule(cfg.Seed, cfg.Duration, res.Partitions)

	rec, err := NewRecorder(filepath.Join(cfg.Dir, "history.jsonl"))
	if err != nil {
		return res, err
	}
	defer rec.Close()
	c, err := startCluster(ctx, cfg.Binary, cfg.Dir, nw, rec)
	if err != nil {
		return res, fmt.Errorf("starting the cluster: %w", err)
	}
	defer c.close()
	if err := c.createTopics(ctx); err != nil {
		return res, err
	}
	hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = c.healthy(hctx, topics)
	cancel()
	if err != nil {
		return res, err
	}
	logf("chaos seed %d: cluster up in %s (%d faults planned over %v)", cfg.Seed, cfg.Dir, len(res.Faults), cfg.Duration)

	// A goroutine's panic ends the run as an error, after cleanup; every
	// way out stops the goroutines and waits for them before the cluster
	// and the network go.
	var panicked atomic.Pointer[error]
	runCtx, stopAll := context.WithCancel(ctx)
	var all sync.WaitGroup
	defer func() {
		stopAll()
		if !waitTimeout(&all, 2*time.Minute) {
			logf("chaos seed %d: workloads still running two minutes after the stop", cfg.Seed)
		}
	}()
	var wg sync.WaitGroup
	spawn := func(group *sync.WaitGroup, name string, fn func()) {
		group.Add(1)
		all.Add(1)
		go func() {
			defer all.Done()
			defer group.Done()
			defer func() {
				if p := recover(); p != nil {
					err := fmt.Errorf("%s panicked: %v\n%s", name, p, debug.Stack())
					panicked.CompareAndSwap(nil, &err)
					stopAll()
				}
			}()
			fn()
		}()
	}
	failure := func(err error) error {
		if p := panicked.Load(); p != nil {
			return *p
		}
		return err
	}
	readCtx, stopReaders := context.WithCancel(runCtx)
	defer stopReaders()
	var readers sync.WaitGroup
	for _, iso := range []string{ReadUncommitted, ReadCommitted} {
		spawn(&readers, "reader-"+iso, func() { c.runReader(readCtx, iso) })
	}
	produceCtx, stopProducers := context.WithCancel(runCtx)
	defer stopProducers()
	var producers sync.WaitGroup
	var producing []*worker
	for _, name := range []string{"i1", "i2"} {
		w := newWorker(c, cfg.Seed, name, logf)
		producing = append(producing, w)
		spawn(&producers, name, func() { w.runIdempotent(produceCtx) })
	}
	for _, name := range []string{"t1", "t2"} {
		w := newWorker(c, cfg.Seed, name, logf)
		producing = append(producing, w)
		spawn(&producers, name, func() { w.runTransactional(produceCtx) })
	}
	eosCtx, stopEOS := context.WithCancel(runCtx)
	defer stopEOS()
	drain := make(chan struct{})
	var eos sync.WaitGroup
	eosWorker := newWorker(c, cfg.Seed, "c1", logf)
	spawn(&eos, "c1", func() { eosWorker.runEOS(eosCtx, drain) })
	start := time.Now()
	nemCtx, stopNemesis := context.WithTimeout(runCtx, cfg.Duration)
	defer stopNemesis()
	spawn(&wg, "nemesis", func() { c.nemesis(nemCtx, start, res.Faults, logf) })

	// The faults run their course; then everything is healed and started,
	// the producers stop, the group drains what is left, and the cluster
	// settles.
	<-nemCtx.Done()
	wg.Wait()
	if err := context.Cause(runCtx); err != nil {
		return res, failure(err)
	}
	logf("chaos seed %d: faults over; healing and settling", cfg.Seed)
	stopProducers()
	if err := c.ensureUp(runCtx); err != nil {
		return res, fmt.Errorf("restarting after the faults: %w", err)
	}
	// A producer stopped finishes its operation in flight, within its
	// timeouts — except a franz-go call that retries without a deadline
	// (InitProducerId while its last transaction cannot complete): its
	// client is closed from here after a minute, and the history shows
	// what never completed.
	stopWaiting(&producers, producing, logf)
	hctx, cancel = context.WithTimeout(runCtx, 120*time.Second)
	err = c.healthy(hctx, topics)
	cancel()
	if err != nil {
		return res, fmt.Errorf("after the faults: %w", err)
	}
	close(drain)
	if !waitTimeout(&eos, 90*time.Second) {
		logf("chaos seed %d: the exactly-once group did not drain within 90s; stopping it", cfg.Seed)
	}
	stopEOS()
	stopWaiting(&eos, []*worker{eosWorker}, logf)
	stopReaders()
	readers.Wait()
	if err := failure(nil); err != nil {
		return res, err
	}

	final := Final{Group: eosGroup, InputTopic: txnTopic}
	open, hw, lso, err := c.settle(runCtx, txnTimeout+80*time.Second)
	if err != nil {
		logf("chaos seed %d: settle: %v", cfg.Seed, err)
	}
	final.Open = open
	sentinels := c.writeSentinels(runCtx, 60*time.Second)
	for _, iso := range []string{ReadUncommitted, ReadCommitted} {
		reads := c.finalRead(runCtx, iso, sentinels, 90*time.Second)
		for i := range reads {
			k := tp{reads[i].Topic, reads[i].Partition}
			reads[i].HighWatermark, reads[i].StableOffset = hw[k], lso[k]
		}
		final.Reads = append(final.Reads, reads...)
	}
	if final.GroupOffsets, err = c.groupOffsets(runCtx); err != nil {
		logf("chaos seed %d: the group's offsets: %v", cfg.Seed, err)
	}
	if err := context.Cause(runCtx); err != nil {
		return res, failure(err)
	}
	c.close()
	rec.Close()
	if b, err := json.Marshal(final); err == nil {
		_ = os.WriteFile(filepath.Join(cfg.Dir, "final.json"), b, 0o644)
	}
	if cfg.Plant != "" {
		if err := plant(cfg.Plant, rec.Events(), &final); err != nil {
			return res, err
		}
	}
	res.History, res.Final = rec.Events(), final
	res.Report = Check(res.History, final)
	res.Summary = res.Report.Summary(res.label(cfg))
	_ = os.WriteFile(filepath.Join(cfg.Dir, "summary.txt"), []byte(res.Summary+"\n"+res.Report.Evidence()), 0o644)
	return res, nil
}

// stopWaiting waits a minute for stopped workers, then closes their
// clients and waits for them to return.
func stopWaiting(wg *sync.WaitGroup, workers []*worker, logf func(string, ...any)) {
	if waitTimeout(wg, time.Minute) {
		return
	}
	for _, w := range workers {
		logf("chaos: %s still busy a minute after the stop; closing its client", w.name)
		w.abandon()
	}
	wg.Wait()
}

// waitTimeout waits for wg, up to d.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// createTopics creates the run's topics, retrying while the cluster
// forms. Segments are small, so that faults land on segment rolls and
// seals too.
func (c *cluster) createTopics(ctx context.Context) error {
	adm, err := c.admin(5 * time.Second)
	if err != nil {
		return err
	}
	defer adm.Close()
	seg := "16384"
	for name, n := range topics {
		var last error
		for range 60 {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := adm.CreateTopic(cctx, n, 1, map[string]*string{"internal.segment.bytes": kmsg.StringPtr(seg)}, name)
			cancel()
			if err == nil {
				err = resp.Err
			}
			if last = err; err == nil || errors.Is(err, context.Canceled) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if last != nil {
			return fmt.Errorf("creating %s: %w", name, last)
		}
	}
	return nil
}

// plant changes a final read the way a bug would, to show the run's
// check catches it (Config.Plant).
func plant(what string, events []Event, f *Final) error {
	if what != "lost" {
		return fmt.Errorf("unknown plant %q (want lost)", what)
	}
	for _, e := range events {
		if e.F != Send || e.Type != OK || e.Rec == nil || e.Txn != "" || strings.HasPrefix(e.Rec.Value, "s:") {
			continue
		}
		for i, r := range f.Reads {
			if r.Topic != e.Rec.Topic || r.Partition != e.Rec.Partition || r.Isolation != ReadUncommitted {
				continue
			}
			for j, got := range r.Records {
				if got.Value == e.Rec.Value {
					f.Reads[i].Records = append(r.Records[:j:j], r.Records[j+1:]...)
					return nil
				}
			}
		}
	}
	return errors.New("plant lost: no acknowledged record in the final read to drop")
}
