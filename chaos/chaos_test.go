package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestChaos is the short run make test makes: one seed, about a minute
// of faults (KAAS_CHAOS_SEED and KAAS_CHAOS_DURATION change them), and
// it fails on any anomaly, with the evidence. Without root it runs
// without partitions and says so, unless KAAS_CHAOS_REQUIRE_PARTITIONS=1
// (CI) makes that a failure. KAAS_CHAOS_PLANT=lost drops an acknowledged
// record from the final read, to see this test fail.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos run takes over a minute (make test runs it)")
	}
	seed := uint64(1)
	if s := os.Getenv("KAAS_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KAAS_CHAOS_SEED: %v", err)
		}
		seed = n
	}
	d := 60 * time.Second
	if s := os.Getenv("KAAS_CHAOS_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("KAAS_CHAOS_DURATION: %v", err)
		}
	}
	dir, err := os.MkdirTemp("", "kaas-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := Run(ctx, Config{Binary: testBinary(t, dir), Seed: seed, Duration: d, Dir: filepath.Join(dir, "run"),
		RequirePartitions: os.Getenv("KAAS_CHAOS_REQUIRE_PARTITIONS") == "1", Plant: os.Getenv("KAAS_CHAOS_PLANT"), Logf: t.Logf})
	if err != nil {
		t.Fatalf("the chaos run could not complete: %v\n%s(run kept in %s)", err, logExcerpts(filepath.Join(dir, "run")), dir)
	}
	t.Log(res.Summary)
	if !res.Partitions {
		t.Logf("WARNING: this run had NO network partitions: %s", res.NoPartitions)
	}
	if res.Report.Total() > 0 {
		t.Fatalf("%s\n%s\n%s(run kept in %s; kaas chaos check %s checks it again)", res.Summary, res.Report.Evidence(),
			logExcerpts(filepath.Join(dir, "run")), dir, filepath.Join(dir, "run"))
	}
	// The check sees what this run wrote: one acknowledged record taken
	// out of the final read is reported lost.
	planted := res.Final
	planted.Reads = append([]PartitionRead(nil), planted.Reads...)
	if err := plant("lost", res.History, &planted); err != nil {
		t.Fatal(err)
	}
	if rep := Check(res.History, planted); rep.Counts[Lost] != 1 {
		t.Fatalf("a record dropped from this run's final read was not reported lost:\n%s", rep.Summary("planted"))
	}
	os.RemoveAll(dir)
}

// testBinary is the kaas binary: KAAS_TEST_BINARY (make test builds one
// for every package), else built into dir. (broker/brokertest.Binary does
// the same for the broker's tests; this package may not import it.)
func testBinary(t *testing.T, dir string) string {
	t.Helper()
	if p := os.Getenv("KAAS_TEST_BINARY"); p != "" {
		return p
	}
	p := filepath.Join(dir, "kaas")
	if out, err := exec.Command("go", "build", "-o", p, "kaas/cmd/kaas").CombinedOutput(); err != nil {
		t.Fatalf("go build kaas/cmd/kaas: %v\n%s", err, out)
	}
	return p
}

// logExcerpts is what a failure report needs from the brokers' logs: the
// lines about leases, ownership, sealing and errors.
func logExcerpts(dir string) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(dir, "broker-*.log"))
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var keep []string
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, "=== chaos") || strings.Contains(line, "lease lost") ||
				strings.Contains(line, "joined the cluster") || strings.Contains(line, "cutting") || strings.Contains(line, "took the partition over") ||
				strings.Contains(line, "panic") || strings.Contains(line, "lease fell in doubt") {
				keep = append(keep, line)
			}
		}
		if len(keep) > 150 {
			keep = append([]string{fmt.Sprintf("… %d earlier lines", len(keep)-150)}, keep[len(keep)-150:]...)
		}
		fmt.Fprintf(&b, "--- %s (excerpt)\n%s\n", filepath.Base(path), strings.Join(keep, "\n"))
	}
	return b.String()
}
