package broker_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
	"kaas/broker/brokertest/loopback"
)

// scrapeSample reads one unlabelled sample from a broker's /metrics.
func scrapeSample(t *testing.T, admin, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(page), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// TestCompactedSIGKILLDuringCleaning: a broker (a real child process) is
// SIGKILLed while a cleaning pass runs, again and again, each time at a
// later point of the pass (the cleaner is throttled so a pass lasts
// long enough to be hit, and held off while a round produces; the kill
// waits for the pass's I/O counter to pass a threshold that grows each
// round). After every restart the
// table reads back exactly the latest value per key acknowledged, every
// record at the offset it was acknowledged at, no offset reused; at the
// end, unthrottled, the cleaner finishes the job and no file of a pass
// is left behind.
func TestCompactedSIGKILLDuringCleaning(t *testing.T) {
	dir := t.TempDir()
	addr, admin := loopback.FreeAddr(t), loopback.FreeAddr(t)
	serve := func() *brokertest.Process { return brokertest.Serve(t, dir, "--listen", addr, "--admin", admin) }
	p := serve()
	compactedTopic(t, addr, "killed")
	// The dynamic broker configs persist across the restarts.
	alterBroker(t, addr, "log.cleaner.io.max.bytes.per.second", "20000")
	at := map[int64]produced{}
	next := int64(0) // the high watermark acknowledged so far
	const rounds = 4
	begin := time.Now()
	// Nothing is cleanable while a round produces (a minimum lag of an
	// hour): a pass run during production could end before the kill
	// point is watched for, leaving none to kill. Once the round is
	// acknowledged the lag goes to 0 and one pass takes the round's
	// whole dirty part, which the kill then lands in.
	lag := func(ms string) {
		if err := alterTopic(t, addr, "killed", false, set("min.compaction.lag.ms", ms)); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < rounds; round++ {
		lag("3600000")
		cl := brokertest.Client(t, addr, kgo.ProducerLinger(0))
		for i := 0; i < 300; i++ {
			v := fmt.Sprintf("r%d-%d-padding-padding-padding-padding-padding", round, i)
			value := &v
			if i%50 == 49 {
				value = nil
			}
			r := &kgo.Record{Topic: "killed", Key: []byte("k" + strconv.Itoa(i%20))}
			pr := produced{key: string(r.Key), tombstone: value == nil}
			if value != nil {
				r.Value, pr.value = []byte(*value), *value
			}
			if err := cl.ProduceSync(brokertest.Context(t, 20*time.Second), r).FirstErr(); err != nil {
				t.Fatalf("round %d, producing %d: %v", round, i, err)
			}
			if r.Offset < next {
				t.Fatalf("round %d: offset %d acknowledged again (the log had reached %d)", round, r.Offset, next)
			}
			at[r.Offset], next = pr, r.Offset+1
		}
		cl.Close()
		t.Logf("round %d: produced by %v", round, time.Since(begin).Round(time.Millisecond))
		io0 := scrapeSample(t, admin, "kaas_log_cleaner_io_bytes_total")
		lag("0")
		// A round's pass reads its ~18 KB dirty part and writes what
		// survives: each kill lands further into it.
		threshold := float64(2000 + round*4000)
		brokertest.Eventually(t, 30*time.Second, fmt.Sprintf("round %d: a pass %.0f bytes in", round, threshold), func() bool {
			return scrapeSample(t, admin, "kaas_log_cleaner_running") == 1 && scrapeSample(t, admin, "kaas_log_cleaner_io_bytes_total")-io0 >= threshold
		})
		t.Logf("round %d: killing at %v", round, time.Since(begin).Round(time.Millisecond))
		p.Kill()
		p = serve()
		checkTable(t, readTopic(t, addr, "killed"), at)
		t.Logf("round %d: read back at %v", round, time.Since(begin).Round(time.Millisecond))
	}

	alterBroker(t, addr, "log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308")
	brokertest.Eventually(t, 30*time.Second, "the cleaner to finish after the kills", func() bool {
		seen := map[string]int{}
		for _, r := range readTopic(t, addr, "killed") {
			seen[string(r.Key)]++
		}
		for _, n := range seen {
			if n > 3 { // at most the active segment's few duplicates
				return false
			}
		}
		return true
	})
	checkTable(t, readTopic(t, addr, "killed"), at)
	t.Logf("cleaned up at %v", time.Since(begin).Round(time.Millisecond))
	if n := scrapeSample(t, admin, "kaas_log_cleaner_failures_total"); n != 0 {
		t.Fatalf("%v failed passes after the restarts", n)
	}
	p.Kill()
	// Recovery, with no pass running after it, leaves no file of an
	// unfinished pass: a restart with the cleaner off shows the dir as
	// recovery leaves it.
	p = brokertest.Serve(t, dir, "--listen", addr, "--admin", admin)
	alterBroker(t, addr, "log.cleaner.backoff.ms", "3600000")
	brokertest.Eventually(t, 30*time.Second, "no pass running", func() bool {
		return scrapeSample(t, admin, "kaas_log_cleaner_running") == 0
	})
	t.Logf("idle at %v", time.Since(begin).Round(time.Millisecond))
	p.Kill()
	brokertest.Serve(t, dir, "--listen", addr, "--admin", admin) // killed when the test ends
	t.Logf("restarted at %v", time.Since(begin).Round(time.Millisecond))
	entries, err := os.ReadDir(filepath.Join(dir, "killed-0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".cleaned") || strings.HasSuffix(e.Name(), ".swap") {
			t.Errorf("file of a pass left after recovery: %s", e.Name())
		}
	}
	checkTable(t, readTopic(t, addr, "killed"), at)
}
