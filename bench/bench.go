// Package bench runs kaas side by side with franz-go's in-memory kfake in
// the same process run, and prints both sides' rates, latencies and their
// ratio (kaas ÷ kfake). `kaas bench <scenario>` is the command line.
//
// Both brokers run in this process, as does the client: kfake can only run
// in-process, so kaas does too, so that both sides share the cores, the
// scheduler and the garbage collector with the client in the same way.
// The sides run one after the other, each against a fresh broker. The rss
// scenario is the exception: it measures broker processes, so it starts
// each broker as a child process.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"time"
)

// Options are the knobs shared by every scenario.
type Options struct {
	Duration        time.Duration // measured time per side
	Partitions      int
	RecordSize      int
	Payload         string // random (default) or zeros
	Brokers         string // benchmark this already-running broker instead of starting kaas
	Report          string // write report.md and PNG charts here
	Rate            int    // records/s of the fixed-rate (e2e) scenario
	Linger          time.Duration
	FencePartitions int
	// CompactKeys is the distinct keys of the compact-clean scenario's
	// RSS partition (16 zero bytes a value; 0: no RSS partition);
	// CompactTable the records of its table partition and CompactValue
	// the size of their random values (either 0: no table partition).
	CompactKeys  int
	CompactTable int
	CompactValue int
	FenceRate    int // bumps/s of the fence scenario; 0 = back to back
	// Consumers is the group size of group-join (0: 10) and the number of
	// committing consumers, each in a group of its own, of offset-commit
	// (0: 1).
	Consumers int
	// Producers is the number of transactional producers of produce-txn
	// and txn-commit, each with its own transactional id, all running at
	// once (0: 1).
	Producers int
	// TxnVersion is the transaction version produce-txn and txn-commit's
	// clients run: 2 (0 too) lets franz-go negotiate transaction version
	// 2 (EndTxn v5, Produce v12, no AddPartitionsToTxn); 1 caps them below
	// it, on the classic protocol.
	TxnVersion     int
	GroupHeartbeat time.Duration // group-join heartbeat interval (classic members'; KIP-848 brokers')
	FlushInterval  time.Duration // kaas --flush-interval-ms (0: fsync before ack)
	SetupTimeout   time.Duration // bound on a side's warm-up (transactions, group join)
	// SessionTTL and FencePoll are the cluster scenarios' brokers'
	// --session-ttl and --fence-poll-interval.
	SessionTTL time.Duration
	FencePoll  time.Duration
	Sides      []string // default kaas, kfake
	// Repeat runs the sides in turn this many times (kaas, kfake, kaas,
	// kfake, ...) and reports medians and the spread of the per-run
	// ratios: on shared cores one run of each says little.
	Repeat int
	// ProfileDir, when set, gets a CPU profile of each side's measured
	// window alone (setup and pre-filling left out):
	// <scenario>-<side>-<run>.pprof.
	ProfileDir string
	// GCHeadroom is the garbage collector's headroom above the live heap
	// in every scenario's measured window, the same on both sides
	// (sameGCHeadroom); 0 leaves Go's default percentage.
	GCHeadroom int64
	Progress   bool // draw progress bars on Out
	Out        io.Writer
	TempDir    string
	Logger     *slog.Logger
}

// Defaults are what `kaas bench` runs with.
func Defaults() Options {
	return Options{
		Duration: 10 * time.Second, Partitions: 6, RecordSize: 100, Rate: 10000,
		FencePartitions: 1000, CompactKeys: 10_000_000, CompactTable: compactTableDefault, CompactValue: compactTableValue, FenceRate: 20, GroupHeartbeat: 100 * time.Millisecond,
		SetupTimeout: 20 * time.Second, GCHeadroom: 512 << 20, SessionTTL: 2 * time.Second, FencePoll: 2 * time.Second, Out: os.Stdout,
	}
}

// Scenario is one benchmark.
type Scenario struct {
	Name  string
	About string // what is measured, one sentence
	// Headline says which rate leads the table: "records" (records/s and
	// MB/s) or an op name ("transactions", "commits") for ops/s.
	Headline string
	// Latency says what one latency sample is.
	Latency string
	// Sides overrides the default kaas/kfake pair (actor benchmark).
	Sides []string
	// Reference is the side the others are compared with (default: the
	// second, kfake or the plain channel).
	Reference string
	// NoTarget: the scenario starts what it measures itself.
	NoTarget bool
	// Setup is how long a side may spend outside its measured duration
	// (default 2 minutes).
	Setup time.Duration
	// Companion is a side measured within the first side's run, in
	// slices alternating with the first side's own (Env.Slice), so that
	// both see the same load on shared cores; its result follows the
	// first side's in every run.
	Companion string
	// Params describes the run's parameters (default: record size,
	// partitions, duration).
	Params func(o *Options) string
	Run    func(ctx context.Context, e *Env) error
}

var scenarios = map[string]*Scenario{}

func register(s *Scenario) { scenarios[s.Name] = s }

// orDefault is n, or def when n is not set.
func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// Scenarios lists the scenarios by name.
func Scenarios() []*Scenario {
	out := make([]*Scenario, 0, len(scenarios))
	for _, s := range scenarios {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return order(out[i].Name) < order(out[j].Name) })
	return out
}

// order keeps the listing in the order a reader expects.
func order(name string) int {
	for i, n := range []string{"produce", "produce-quota", "produce-idempotent", "produce-secure", "produce-txn", "consume", "e2e", "txn-commit", "fence", "offset-commit", "group-join", "group-join-cooperative", "group-join-848", "share", "share-8", "actor", "rss", "compact", "failover", "fence-ring", "produce-cluster"} {
		if n == name {
			return i
		}
	}
	return 100
}

// Lookup finds a scenario by name.
func Lookup(name string) (*Scenario, bool) {
	s, ok := scenarios[name]
	return s, ok
}

// Env is what a scenario's Run gets for one side.
type Env struct {
	Side    string
	name    string // scenario
	run     int    // repetition, from 1
	profile *os.File
	Target  *Target // nil for NoTarget scenarios
	Opts    *Options
	Rec     *Recorder
	started bool
	end     time.Time
	sched   *metrics.Float64Histogram // the scheduler latencies at Begin (schedNote)
	// measured is the side's result once EndMeasuring froze it.
	measured *Result
	// companion records the scenario's Companion side (Env.Slice), and
	// companionRes is its result.
	companion     *Recorder
	companionSide string
	companionRes  *Result
	// restoreGC ends the measured window's GC headroom (sameGCHeadroom).
	restoreGC func()
	notes     []string
	summary   string
	val       float64
	valUnit   string
}

// Note adds a line under the side's figures (e.g. a broker-side
// histogram).
func (e *Env) Note(format string, args ...any) {
	e.notes = append(e.notes, fmt.Sprintf(format, args...))
}

// RunSummary sets the side's figures of this run in one line, printed
// run by run under the table when the scenario is repeated (a side
// without a reference to be a ratio of: its notes are the median run's).
func (e *Env) RunSummary(format string, args ...any) {
	e.summary = fmt.Sprintf(format, args...)
}

// SetValue makes the side's headline a measured quantity instead of a rate
// (RSS in MiB).
func (e *Env) SetValue(v float64, unit string) { e.val, e.valUnit = v, unit }

func (e *Env) value() (float64, string, bool) { return e.val, e.valUnit, e.valUnit != "" }

// Begin starts measuring (after any setup); Running reports until the
// side's duration is over.
func (e *Env) Begin() {
	if e.restoreGC == nil {
		e.restoreGC = e.sameGCHeadroom(e.Opts.GCHeadroom)
	}
	e.startProfile()
	e.Rec.begin()
	if e.companion != nil {
		e.companion.begin()
		e.companion.pause()
	}
	e.sched = readSched()
	e.started = true
	e.end = time.Now().Add(e.Opts.Duration)
}

// EndMeasuring freezes the side's figures (elapsed time, CPU, profile)
// before a scenario does work that is not part of what it measures, such
// as reading the broker's metrics for its notes. Without it they are
// taken when the scenario returns.
func (e *Env) EndMeasuring() {
	if !e.started || e.measured != nil {
		return
	}
	e.measured = e.Rec.end(e.Side)
	if e.companion != nil {
		e.companionRes = e.companion.end(e.companionSide)
	}
	e.stopProfile()
	e.endGCHeadroom()
}

// endGCHeadroom gives the process back Go's collector settings after the
// measured window (or a scenario that failed in it).
func (e *Env) endGCHeadroom() {
	if e.restoreGC != nil {
		e.restoreGC()
		e.restoreGC = nil
	}
}

// Slice makes the companion side's recorder (true) or the side's own
// (false) the one that counts time, CPU and the ops the scenario gives
// it, and pauses the other: a scenario with a Companion alternates
// slices of its two conditions within one run.
func (e *Env) Slice(companion bool) {
	on, off := e.Rec, e.companion
	if companion {
		on, off = off, on
	}
	off.pause()
	on.resume()
}

// CompanionRec is the companion side's recorder (nil without one).
func (e *Env) CompanionRec() *Recorder { return e.companion }

// Running is true until the measured duration is over.
func (e *Env) Running() bool { return time.Now().Before(e.end) }

// Deadline is when the measured duration ends.
func (e *Env) Deadline() time.Time { return e.end }

// Outcome is a scenario's results, one per side.
type Outcome struct {
	Scenario *Scenario
	Opts     Options
	// Results has one per side: the only run, or with Repeat the medians
	// over Runs.
	Results []*Result
	// Runs holds every run's results, one slice per repetition, in side
	// order.
	Runs [][]*Result
}

// runSides is the sides a run takes: a scenario's own list (kaas-1 and
// kaas-3, kaas alone...) or else the kaas/kfake pair, narrowed to the
// sides --sides names when it names any of them, so that `--sides kaas`
// skips kfake in every scenario that has it rather than only in those
// without their own list. A scenario none of whose sides are named runs
// all of its own, since dropping it silently would look like a pass.
func runSides(s *Scenario, o Options) []string {
	own := s.Sides
	if len(own) == 0 {
		own = []string{"kaas", "kfake"}
	}
	if len(o.Sides) == 0 {
		return own
	}
	if len(s.Sides) == 0 {
		return o.Sides
	}
	var picked []string
	for _, side := range own {
		if slices.Contains(o.Sides, side) {
			picked = append(picked, side)
		}
	}
	if len(picked) == 0 {
		return own
	}
	return picked
}

// Run runs one scenario on every side and prints the comparison.
func Run(ctx context.Context, s *Scenario, o Options) *Outcome {
	sides := runSides(s, o)
	out := &Outcome{Scenario: s, Opts: o}
	for rep := 0; rep < max(o.Repeat, 1) && ctx.Err() == nil; rep++ {
		var run []*Result
		for i, side := range sides {
			load := loadAverage()
			companion := ""
			if i == 0 {
				companion = s.Companion
			}
			for _, r := range runSide(ctx, s, &o, side, companion, rep+1) {
				r.Load = load
				run = append(run, r)
			}
		}
		out.Runs = append(out.Runs, run)
	}
	out.Results = out.Runs[0]
	if len(out.Runs) > 1 {
		out.Results = medians(out.Runs)
	}
	printOutcome(o.Out, out)
	return out
}

// runSide runs one side: its result, and its companion's when it has
// one (companion: the side's name, measured in the same run).
func runSide(ctx context.Context, s *Scenario, o *Options, side, companion string, run int) []*Result {
	e := &Env{Side: side, name: s.Name, run: run, Opts: o, Rec: newRecorder(seriesInterval(o.Duration))}
	if companion != "" {
		e.companion, e.companionSide = newRecorder(seriesInterval(o.Duration)), companion
	}
	res := runOneSide(ctx, s, o, e)
	if companion == "" {
		return []*Result{res}
	}
	c := e.companionRes
	if c == nil {
		c = &Result{Err: res.Err}
	} else {
		c.Err = res.Err
	}
	c.Side = companion
	return []*Result{res, c}
}

func runOneSide(ctx context.Context, s *Scenario, o *Options, e *Env) (res *Result) {
	defer e.stopProfile()
	defer e.endGCHeadroom()
	if !s.NoTarget {
		t, err := startTarget(e.Side, o)
		if err != nil {
			return &Result{Side: e.Side, Err: err}
		}
		defer t.Close()
		e.Target, e.Side = t, t.Side
	}
	bar := startProgress(o, s.Name+" "+e.Side, e)
	defer bar.finish()
	ctx, cancel := context.WithTimeout(ctx, o.Duration+setupBudget(s, o))
	defer cancel()
	err := runRecovered(ctx, s, e)
	if !e.started {
		if err == nil {
			err = errors.New("scenario never started measuring")
		}
		return &Result{Side: e.Side, Err: err}
	}
	e.EndMeasuring()
	res = e.measured
	res.Err = err
	if v, unit, ok := e.value(); ok {
		res.Value, res.ValueUnit = v, unit
	}
	res.Notes = append(res.Notes, e.notes...)
	res.Summary = e.summary
	return res
}

// startProfile starts the side's CPU profile (ProfileDir) when measuring
// begins.
func (e *Env) startProfile() {
	if e.Opts.ProfileDir == "" || e.profile != nil {
		return
	}
	if err := os.MkdirAll(e.Opts.ProfileDir, 0o755); err != nil {
		e.Note("no CPU profile: %v", err)
		return
	}
	name := strings.NewReplacer("/", "_", ":", "_").Replace(fmt.Sprintf("%s-%s-%d.pprof", e.name, e.Side, e.run))
	f, err := os.Create(filepath.Join(e.Opts.ProfileDir, name))
	if err != nil {
		e.Note("no CPU profile: %v", err)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		e.Note("no CPU profile: %v", err)
		return
	}
	e.profile = f
}

func (e *Env) stopProfile() {
	if e.profile != nil {
		pprof.StopCPUProfile()
		e.profile.Close()
		e.profile = nil
	}
}

// runRecovered turns a panicking scenario into an error for its side.
func runRecovered(ctx context.Context, s *Scenario, e *Env) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return s.Run(ctx, e)
}

// setupBudget is how long a side may spend outside its measured duration
// (topic creation, pre-filling, joining, child processes).
func setupBudget(s *Scenario, o *Options) time.Duration {
	if s.Setup > 0 {
		return s.Setup + o.Duration
	}
	return 2*time.Minute + o.Duration
}

// seriesInterval gives a chart about 20–60 points.
func seriesInterval(d time.Duration) time.Duration {
	iv := d / 30
	switch {
	case iv < 50*time.Millisecond:
		return 50 * time.Millisecond
	case iv > time.Second:
		return time.Second
	}
	return iv
}
