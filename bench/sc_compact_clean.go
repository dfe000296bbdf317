package bench

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The compact-clean scenario cleans compacted partitions in a kaas broker
// child process, each produced whole with the cleaner off, then cleaned
// once with it on (default dedupe buffer, 128 MiB). Two partitions, one
// after the other in the same broker:
//   - a table of --compact-table-records (2 M) records with --compact-value-size
//     random bytes each (200 by default: Kafka "table" topics — Connect's
//     config and status topics, Schema Registry's _schemas, Streams
//     changelogs — hold records of hundreds of bytes; 200 is the lower
//     end, so the per-record cost counts), over a quarter as many keys,
//     each updated 4 times on average, in random order (fillKey): the
//     pass removes about three records in four and rewrites the rest in
//     every segment, as a table's cleaning does (with every key
//     distinct it would find nothing to drop and write nothing). They fit
//     the default buffer: one pass. Its MB/s of dirty log per second of passes
//     (kaas_log_cleaner_pass_seconds_total), against the disk's
//     sequential bandwidth measured just before and just after it (4 ×
//     the log, 32 to 256 MiB, O_DIRECT writes + fdatasync and O_DIRECT
//     reads, in the temp dir the broker's data is in: disk.go; the
//     faster of the two reads), is the headline; goal ≥ 50%;
//   - --compact-keys (10 M) keys with 16 zero bytes each (records of
//     ~10 bytes on disk: the map's worst case, several passes, its MB/s
//     follows the record count; noted): the broker's peak RSS while it
//     is cleaned (VmHWM, reset through /proc/PID/clear_refs when the
//     cleaner is switched on); goal ≤ the dedupe buffer + 64 MiB.
// --compact-value-size 0 (or --compact-table-records 0) leaves the table
// out (the headline is then the second partition's MB/s); --compact-keys 0
// leaves the second partition out (no RSS figure), the table alone. Each
// --repeat is a fresh broker child that fills and cleans both again, so
// the runs are reported one by one (Env.RunSummary) beside their median.
// kfake has no log cleaner: there is no kfake side, the figures are read
// against their goals.

func init() {
	register(&Scenario{
		Name: "compact-clean",
		About: "compacted partitions cleaned by a kaas broker process: a table of 200-byte values, each key updated 4 times (the cleaner's MB/s of dirty log " +
			"against the disk's sequential bandwidth (O_DIRECT) measured in the same run, goal ≥ 50%) and one of --compact-keys distinct keys " +
			"(the process's peak RSS during the cleaning, goal ≤ log.cleaner.dedupe.buffer.size + 64 MiB; --compact-keys 0 leaves it out); " +
			"each --repeat fills and cleans both again in a fresh broker, reported run by run beside the median",
		Headline: "cleaner MB/s", Latency: "-",
		Sides:    []string{"kaas"},
		NoTarget: true,
		Setup:    3 * time.Minute, // two partitions filled and cleaned
		Params: func(o *Options) string {
			var parts []string
			if compactTableRecords(o) > 0 {
				parts = append(parts, fmt.Sprintf("table: %d records of %d keys, %d-byte random values",
					compactTableRecords(o), compactTableKeys(o), o.CompactValue))
			}
			if o.CompactKeys > 0 {
				parts = append(parts, fmt.Sprintf("RSS: %d distinct keys, %d-byte zero values", o.CompactKeys, compactCleanValue))
			}
			return strings.Join(append(parts, "dedupe buffer 128 MiB"), "; ")
		},
		Run: compactClean,
	})
}

const (
	compactCleanValue  = 16 // zero bytes, the RSS partition's values
	compactDedupeBytes = 128 << 20
	// compactTableValue is --compact-value-size's default.
	compactTableValue = 200
)

// compactTableRecords is the table partition's records (0: no table),
// compactTableKeys its keys: compactTableUpdates records each.
func compactTableRecords(o *Options) int {
	if o.CompactValue <= 0 {
		return 0
	}
	return max(o.CompactTable, 0)
}

func compactTableKeys(o *Options) int { return max(compactTableRecords(o)/compactTableUpdates, 1) }

const (
	compactTableUpdates = 4
	// compactTableDefault is --compact-table-records's default: one
	// pass's worth of the default dedupe buffer.
	compactTableDefault = 2_000_000
)

// cleanChild is the broker child process and a client of it.
type cleanChild struct {
	e              *Env
	pid            int
	admin, dataDir string
	topic          string // the partition filled last
	cl             *kgo.Client
	adm            *kadm.Client
}

// cleaned is one partition's cleaning.
type cleaned struct {
	records, keys               int
	dirty                       int64 // bytes of log
	secs, passes, read, written float64
	peakMiB, rssBeforeMiB       float64
	// cpu is the broker process's CPU time while it cleaned (it does
	// nothing else then): on a loaded machine the passes wait for the
	// cores, and dirty bytes per CPU-second is what one core to itself
	// would clean.
	cpu time.Duration
}

func (c cleaned) mbs() float64 { return float64(c.dirty) / 1e6 / c.secs }

func (c cleaned) mbsPerCPU() float64 { return float64(c.dirty) / 1e6 / c.cpu.Seconds() }

func compactClean(ctx context.Context, e *Env) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("compact-clean reads /proc: linux only")
	}
	if compactTableRecords(e.Opts) == 0 && e.Opts.CompactKeys <= 0 {
		return fmt.Errorf("compact-clean: nothing to clean (--compact-keys 0 and no table)")
	}
	cmd, stdin, stdout, err := startChild(childEnv + "=kaas-admin")
	if err != nil {
		return fmt.Errorf("starting the kaas child: %w", err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
	if err != nil || !ok {
		return fmt.Errorf("the kaas child did not report its address (%q): %v", line, err)
	}
	line, err = out.ReadString('\n')
	c := &cleanChild{e: e, pid: cmd.Process.Pid}
	if _, serr := fmt.Sscanf(strings.TrimSpace(line), "ADMIN %s DATA %s", &c.admin, &c.dataDir); err != nil || serr != nil {
		return fmt.Errorf("the kaas child did not report its admin address (%q): %v %v", line, err, serr)
	}
	e.Target = &Target{Side: e.Side, Addrs: []string{addr}}
	c.cl, err = e.client(kgo.DisableIdempotentWrite(), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	defer c.cl.Close()
	c.adm = kadm.NewClient(c.cl)

	// The disk is measured just before and just after the headline
	// partition's cleaning, the cleaner held against the faster figure.
	var table *cleaned
	var disk [2]diskBandwidth
	headline := func(dirty int64, records, keys int) (*cleaned, error) {
		var err error
		if disk[0], err = measureDisk(e, dirty); err != nil {
			return nil, err
		}
		e.Begin()
		p, err := c.clean(ctx, dirty, records, keys)
		if err != nil {
			return nil, err
		}
		if disk[1], err = measureDisk(e, dirty); err != nil {
			return nil, err
		}
		return p, nil
	}
	if records := compactTableRecords(e.Opts); records > 0 {
		n := e.Opts.CompactValue
		// Incompressible: slices of a random pool larger than a batch,
		// so the producer's compression finds no repeats.
		pool := make([]byte, 4<<20+n)
		_, _ = crand.Read(pool)
		value := func(i int) []byte { at := (i * n) % (4 << 20); return pool[at : at+n] }
		keys := compactTableKeys(e.Opts)
		dirty, err := c.fill(ctx, records, keys, value)
		if err != nil {
			return err
		}
		if table, err = headline(dirty, records, keys); err != nil {
			return err
		}
	}
	var big *cleaned
	if n := e.Opts.CompactKeys; n > 0 {
		zeros := make([]byte, compactCleanValue)
		dirty, err := c.fill(ctx, n, n, func(int) []byte { return zeros })
		if err != nil {
			return err
		}
		if table == nil {
			big, err = headline(dirty, n, n)
		} else {
			big, err = c.clean(ctx, dirty, n, n)
		}
		if err != nil {
			return err
		}
	}
	e.EndMeasuring()

	head := table
	if head == nil {
		head = big
	}
	diskMBs := max(disk[0].yardstick(), disk[1].yardstick())
	writeMBs := max(disk[0].writeMBs, disk[1].writeMBs)
	e.SetValue(head.mbs(), "cleaner MB/s")
	note := func(what string, p *cleaned) {
		e.Note("cleaner, %s: %.1f MB of dirty log (%d records, %d keys) cleaned in %.0f passes, %.2fs of passes: %.1f MB/s, %.0f%% of the disk; %.1f MB read, %.1f MB written; "+
			"broker CPU %.2fs: %.0f MB per CPU-second (%.0f%% of the disk)",
			what, float64(p.dirty)/1e6, p.records, p.keys, p.passes, p.secs, p.mbs(), 100*p.mbs()/diskMBs, p.read/1e6, p.written/1e6,
			p.cpu.Seconds(), p.mbsPerCPU(), 100*p.mbsPerCPU()/diskMBs)
	}
	if table != nil {
		note(fmt.Sprintf("table of %d-byte random values", e.Opts.CompactValue), table)
	}
	if big != nil {
		note(fmt.Sprintf("%d-byte zero values (the per-record worst case)", compactCleanValue), big)
	}
	e.Note("disk before the headline cleaning: %v", disk[0])
	e.Note("disk after it: %v", disk[1])
	e.Note("disk yardstick: the faster O_DIRECT read of the two, %.0f MB/s; cleaner/disk %.0f%% (goal ≥ 50%%); against the faster O_DIRECT write (%.0f MB/s) %.0f%%",
		diskMBs, 100*head.mbs()/diskMBs, writeMBs, 100*head.mbs()/writeMBs)
	summary := fmt.Sprintf("%.1f MB/s, %.0f%% of a %.0f MB/s O_DIRECT read; %.0f MB per CPU-second", head.mbs(), 100*head.mbs()/diskMBs, diskMBs, head.mbsPerCPU())
	if big != nil {
		e.Note("memory: broker RSS %.1f MiB before cleaning the %d keys, peak during it (VmHWM) %.1f MiB; goal ≤ dedupe buffer %d MiB + 64 MiB = %d MiB",
			big.rssBeforeMiB, big.keys, big.peakMiB, compactDedupeBytes>>20, compactDedupeBytes>>20+64)
		summary += fmt.Sprintf("; peak RSS %.1f MiB", big.peakMiB)
	}
	e.RunSummary("%s", summary)
	return nil
}

// alter sets a broker config, each change with its own setup bound:
// filling 10 M keys may take longer than one.
func (c *cleanChild) alter(ctx context.Context, name, v string) error {
	actx, cancel := withSetupTimeout(ctx, c.e.Opts)
	defer cancel()
	return alterBroker(actx, c.adm, []kadm.AlterConfig{{Name: name, Value: strPtr(v)}})
}

// fill creates a compacted partition with the cleaner off and produces
// records records to it, the i-th with key fillKey(i), then a last record
// after the active segment is rolled (segment.ms 1), so that all of them
// are in closed segments. It returns the partition's bytes of log.
func (c *cleanChild) fill(ctx context.Context, records, keys int, value func(int) []byte) (int64, error) {
	if err := c.alter(ctx, "log.cleaner.backoff.ms", "86400000"); err != nil { // off while filling
		return 0, err
	}
	sctx, cancel := withSetupTimeout(ctx, c.e.Opts)
	defer cancel()
	topic := uniqueTopic("bench-compact-clean")
	resp, err := c.adm.CreateTopic(sctx, 1, 1, map[string]*string{
		"cleanup.policy": strPtr("compact"), "segment.bytes": strPtr(strconv.Itoa(64 << 20)), "min.cleanable.dirty.ratio": strPtr("0.01"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", topic, err)
	}
	c.topic = topic
	var fail firstError
	for i := 0; i < records && fail.get() == nil && ctx.Err() == nil; i++ {
		c.cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%010d", fillKey(i, records, keys))), Value: value(i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				fail.set(err)
			}
		})
	}
	if err := c.cl.Flush(ctx); err != nil {
		return 0, err
	}
	if err := fail.get(); err != nil {
		return 0, fmt.Errorf("filling: %w", err)
	}
	rctx, rcancel := withSetupTimeout(ctx, c.e.Opts)
	defer rcancel()
	if r, err := c.adm.AlterTopicConfigs(rctx, []kadm.AlterConfig{{Name: "segment.ms", Value: strPtr("1")}}, topic); err != nil || r[0].Err != nil {
		return 0, fmt.Errorf("rolling: %v %v", err, r)
	}
	time.Sleep(5 * time.Millisecond) // segment.ms must pass: a roll is by age
	if err := c.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("last"), Value: value(0)}).FirstErr(); err != nil {
		return 0, err
	}
	return dirSize(filepath.Join(c.dataDir, topic+"-0"), ".log")
}

// fillKey is the i-th record's key of records over keys: each key once,
// in order, when there are as many keys as records; else a key drawn at
// random (splitmix64 of i: the same every run), so a table's updates, and
// the records that survive them, are spread over every segment, as
// updates by users are (in key order, whole segments would be dropped
// or kept and the pass would rewrite almost nothing).
func fillKey(i, records, keys int) int {
	if keys >= records {
		return i
	}
	z := uint64(i) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return int((z ^ z>>31) % uint64(keys))
}

// clean switches the cleaner on and waits until the last filled
// partition is cleaned up to its records (offsets), with the broker's
// peak RSS reset first.
func (c *cleanChild) clean(ctx context.Context, dirty int64, records, keys int) (*cleaned, error) {
	p := &cleaned{records: records, keys: keys, dirty: dirty}
	p.rssBeforeMiB, _ = procMiB(c.pid, "VmRSS:")
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", c.pid), []byte("5"), 0); err != nil {
		return nil, fmt.Errorf("resetting the peak RSS: %w", err)
	}
	m0, err := scrapeCleaner(c.admin)
	if err != nil {
		return nil, err
	}
	cpu0 := procCPU(c.pid)
	if err := c.alter(ctx, "log.cleaner.backoff.ms", "50"); err != nil {
		return nil, err
	}
	var cleanedTo int64
	for cleanedTo < int64(records) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		time.Sleep(50 * time.Millisecond) // polling the inspector
		if cleanedTo, err = inspectCleanedTo(c.admin, c.topic+"-0"); err != nil {
			return nil, err
		}
	}
	p.cpu = procCPU(c.pid) - cpu0
	m1, err := scrapeCleaner(c.admin)
	if err != nil {
		return nil, err
	}
	if p.peakMiB, err = procMiB(c.pid, "VmHWM:"); err != nil {
		return nil, err
	}
	p.secs = m1["kaas_log_cleaner_pass_seconds_total"] - m0["kaas_log_cleaner_pass_seconds_total"]
	p.passes = m1["kaas_log_cleaner_passes_total"] - m0["kaas_log_cleaner_passes_total"]
	p.read = m1["kaas_log_cleaner_bytes_read_total"] - m0["kaas_log_cleaner_bytes_read_total"]
	p.written = m1["kaas_log_cleaner_bytes_written_total"] - m0["kaas_log_cleaner_bytes_written_total"]
	if p.secs <= 0 {
		return nil, fmt.Errorf("no pass time counted")
	}
	return p, nil
}

// measureDisk measures the disk's sequential bandwidth in the temp dir
// the broker's data is in, with 4 × a log of dirty bytes (32–256 MiB).
func measureDisk(e *Env, dirty int64) (diskBandwidth, error) {
	dir := e.Opts.TempDir
	if dir == "" {
		dir = os.TempDir() // where the child's data directory is too
	}
	d, err := measureDiskBandwidth(dir, min(max(4*dirty, 32<<20), 256<<20))
	if err != nil {
		return d, fmt.Errorf("measuring the disk: %w", err)
	}
	return d, nil
}

// dirSize sums the sizes of dir's files ending in suffix.
func dirSize(dir, suffix string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			info, err := e.Info()
			if err != nil {
				return 0, err
			}
			n += info.Size()
		}
	}
	return n, nil
}

// scrapeCleaner reads the kaas_log_cleaner_* samples of a /metrics page.
func scrapeCleaner(admin string) (map[string]float64, error) {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(page), "\n") {
		if name, v, ok := strings.Cut(line, " "); ok && strings.HasPrefix(name, "kaas_log_cleaner_") {
			out[name], _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return out, nil
}

// inspectCleanedTo is the partition's cleaned-up-to offset in the
// inspector.
func inspectCleanedTo(admin, partition string) (int64, error) {
	resp, err := http.Get("http://" + admin + "/api/actors/partition/" + partition)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var d struct {
		State struct {
			Cleaner *struct {
				CleanedTo int64 `json:"cleaned_to"`
			} `json:"cleaner"`
		} `json:"state"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return 0, err
	}
	if d.State.Cleaner == nil {
		return 0, nil
	}
	return d.State.Cleaner.CleanedTo, nil
}
