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

// The compact-clean scenario: one partition of --compact-keys distinct
// keys (10 M by default) produced to a kaas broker child process with
// its cleaner off, then one cleaning of it with the cleaner on (default
// dedupe buffer, 128 MiB: 10 M keys take several passes). It reports
//   - the cleaner's throughput, MB of dirty log cleaned per second of
//     passes (kaas_log_cleaner_pass_seconds_total), against the disk's
//     sequential write bandwidth measured in the same run (4 × the log,
//     32 to 256 MiB, written in 1 MiB writes and fsynced, in the temp
//     dir the broker's data is in); goal ≥ 50%;
//   - the broker process's peak RSS during the cleaning (VmHWM, reset
//     through /proc/PID/clear_refs when the cleaner is switched on);
//     goal ≤ the dedupe buffer + 64 MiB.
// kfake has no log cleaner: there is no kfake side, the figures are read
// against their goals.

func init() {
	register(&Scenario{
		Name: "compact-clean",
		About: "one compacted partition of --compact-keys distinct keys cleaned by a kaas broker process: the cleaner's MB/s of dirty log " +
			"against the disk's sequential write bandwidth measured in the same run (goal ≥ 50%), and the process's peak RSS during " +
			"the cleaning (goal ≤ log.cleaner.dedupe.buffer.size + 64 MiB)",
		Headline: "cleaner MB/s", Latency: "-",
		Sides:    []string{"kaas"},
		NoTarget: true,
		Params: func(o *Options) string {
			if o.CompactValue > 0 {
				return fmt.Sprintf("%d distinct keys, %d-byte random values, dedupe buffer 128 MiB", o.CompactKeys, o.CompactValue)
			}
			return fmt.Sprintf("%d distinct keys, %d-byte zero values, dedupe buffer 128 MiB", o.CompactKeys, compactCleanValue)
		},
		Run: compactClean,
	})
}

const (
	compactCleanValue  = 16 // zero bytes, without --compact-value-size
	compactDedupeBytes = 128 << 20
)

func compactClean(ctx context.Context, e *Env) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("compact-clean reads /proc: linux only")
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
	var admin, dataDir string
	if _, serr := fmt.Sscanf(strings.TrimSpace(line), "ADMIN %s DATA %s", &admin, &dataDir); err != nil || serr != nil {
		return fmt.Errorf("the kaas child did not report its admin address (%q): %v %v", line, err, serr)
	}
	e.Target = &Target{Side: e.Side, Addrs: []string{addr}}
	pid := cmd.Process.Pid

	cl, err := e.client(kgo.DisableIdempotentWrite(), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	sctx, cancel := withSetupTimeout(ctx, e.Opts)
	defer cancel()
	// Each change has its own setup bound: filling 10 M keys may take
	// longer than one.
	alter := func(name, v string) error {
		actx, cancel := withSetupTimeout(ctx, e.Opts)
		defer cancel()
		resp, err := adm.AlterBrokerConfigs(actx, []kadm.AlterConfig{{Name: name, Value: strPtr(v)}})
		if err == nil && len(resp) > 0 {
			err = resp[0].Err
		}
		if err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
		return nil
	}
	if err := alter("log.cleaner.backoff.ms", "86400000"); err != nil { // off while filling
		return err
	}
	topic := uniqueTopic("bench-compact-clean")
	resp, err := adm.CreateTopic(sctx, 1, 1, map[string]*string{
		"cleanup.policy": strPtr("compact"), "segment.bytes": strPtr(strconv.Itoa(64 << 20)), "min.cleanable.dirty.ratio": strPtr("0.01"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", topic, err)
	}

	// Fill: every key once, then a last record after the active segment
	// is rolled (segment.ms 1), so all of them are in closed segments.
	var fail firstError
	value := func(int) []byte { return make([]byte, compactCleanValue) }
	if n := e.Opts.CompactValue; n > 0 {
		// Incompressible: slices of a random pool larger than a batch,
		// so the producer's compression finds no repeats.
		pool := make([]byte, 4<<20+n)
		_, _ = crand.Read(pool)
		value = func(i int) []byte { at := (i * n) % (4 << 20); return pool[at : at+n] }
	}
	for i := 0; i < e.Opts.CompactKeys && fail.get() == nil && ctx.Err() == nil; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%010d", i)), Value: value(i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				fail.set(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if err := fail.get(); err != nil {
		return fmt.Errorf("filling: %w", err)
	}
	rctx, rcancel := withSetupTimeout(ctx, e.Opts)
	defer rcancel()
	if r, err := adm.AlterTopicConfigs(rctx, []kadm.AlterConfig{{Name: "segment.ms", Value: strPtr("1")}}, topic); err != nil || r[0].Err != nil {
		return fmt.Errorf("rolling: %v %v", err, r)
	}
	time.Sleep(5 * time.Millisecond) // segment.ms must pass: a roll is by age
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("last"), Value: value(0)}).FirstErr(); err != nil {
		return err
	}
	dirty, err := dirSize(filepath.Join(dataDir, topic+"-0"), ".log")
	if err != nil {
		return err
	}

	// The disk, now, in the same run.
	diskDir := e.Opts.TempDir
	if diskDir == "" {
		diskDir = os.TempDir() // where the child's data directory is too
	}
	diskBytes := min(max(4*dirty, 32<<20), 256<<20)
	diskMBs, err := seqWriteMBs(diskDir, int(diskBytes))
	if err != nil {
		return fmt.Errorf("measuring the disk: %w", err)
	}

	rssBefore, _ := procMiB(pid, "VmRSS:")
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("resetting the peak RSS: %w", err)
	}
	m0, err := scrapeCleaner(admin)
	if err != nil {
		return err
	}
	e.Begin()
	if err := alter("log.cleaner.backoff.ms", "50"); err != nil {
		return err
	}
	var cleanedTo int64
	for cleanedTo < int64(e.Opts.CompactKeys) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond) // polling the inspector
		cleanedTo, err = inspectCleanedTo(admin, topic+"-0")
		if err != nil {
			return err
		}
	}
	e.EndMeasuring()
	m1, err := scrapeCleaner(admin)
	if err != nil {
		return err
	}
	peak, err := procMiB(pid, "VmHWM:")
	if err != nil {
		return err
	}
	secs := m1["kaas_log_cleaner_pass_seconds_total"] - m0["kaas_log_cleaner_pass_seconds_total"]
	passes := m1["kaas_log_cleaner_passes_total"] - m0["kaas_log_cleaner_passes_total"]
	if secs <= 0 {
		return fmt.Errorf("no pass time counted")
	}
	mbs := float64(dirty) / 1e6 / secs
	e.SetValue(mbs, "cleaner MB/s")
	e.Note("cleaner: %.1f MB of dirty log (%d keys) cleaned in %.0f passes, %.2fs of passes: %.1f MB/s; %.1f MB read, %.1f MB written",
		float64(dirty)/1e6, e.Opts.CompactKeys, passes, secs, mbs,
		(m1["kaas_log_cleaner_bytes_read_total"]-m0["kaas_log_cleaner_bytes_read_total"])/1e6,
		(m1["kaas_log_cleaner_bytes_written_total"]-m0["kaas_log_cleaner_bytes_written_total"])/1e6)
	e.Note("disk: sequential write bandwidth %.1f MB/s (%d MiB in 1 MiB writes + fsync, in %s, just before the cleaning); cleaner/disk %.0f%% (goal ≥ 50%%)",
		diskMBs, diskBytes>>20, diskDir, 100*mbs/diskMBs)
	e.Note("memory: broker RSS %.1f MiB before the cleaning, peak during it (VmHWM) %.1f MiB; goal ≤ dedupe buffer %d MiB + 64 MiB = %d MiB",
		rssBefore, peak, compactDedupeBytes>>20, compactDedupeBytes>>20+64)
	return nil
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

// seqWriteMBs writes size bytes to a new file in dir in 1 MiB writes,
// fsyncs it, and returns the rate in MB/s.
func seqWriteMBs(dir string, size int) (float64, error) {
	f, err := os.CreateTemp(dir, "kaas-bench-disk-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	start := time.Now()
	for n := 0; n < size; n += len(buf) {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return float64(size) / 1e6 / time.Since(start).Seconds(), nil
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
