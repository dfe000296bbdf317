package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// TestServeListening: once `kaas serve` logs "listening on ADDR", ADDR
// accepts connections and answers Kafka requests; the address is the
// bound one (port 0 resolved).
func TestServeListening(t *testing.T) {
	p := brokertest.Serve(t, t.TempDir())
	if !brokertest.Accepts(p.Addr) {
		t.Fatalf("logged listening on %s, but it does not accept connections", p.Addr)
	}
	if !regexp.MustCompile(`^127\.0\.0\.1:[1-9][0-9]*$`).MatchString(p.Addr) {
		t.Fatalf("listening address %q is not the bound one", p.Addr)
	}
	resp := brokertest.Dial(t, p.Addr).RoundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions: %+v", resp)
	}
	// The line is logged once, and no kaas line precedes the port opening
	// that could be mistaken for readiness.
	if n := strings.Count(p.Log(), "listening on"); n != 1 {
		t.Fatalf("%d listening lines:\n%s", n, p.Log())
	}
}

// TestServeSIGTERM: on SIGTERM the broker stops taking connections,
// answers the request in flight (a long-poll fetch, well before its
// MaxWait), fsyncs, marks every
// partition cleanly shut down and exits 0; a restart finds every record.
func TestServeSIGTERM(t *testing.T) {
	dir := t.TempDir()
	p := brokertest.Serve(t, dir, "--log-level", "debug")
	brokertest.CreateTopic(t, p.Addr, "term", 2, nil)
	cl := brokertest.Client(t, p.Addr, kgo.DefaultProduceTopic("term"))
	ctx := brokertest.Context(t, time.Minute)
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()

	// In flight at the signal: a fetch that would wait 60s for new data;
	// a shutdown answers it at once with what it has.
	c := brokertest.Dial(t, p.Addr)
	c.RoundTrip(kmsg.NewPtrApiVersionsRequest())
	fetch := brokertest.FetchRequest("term", 0, 50, 60*time.Second, 1, 1<<20, 1<<20)
	corr := c.Send(fetch)
	// The debug log names each request as it is dispatched.
	brokertest.Eventually(t, 10*time.Second, "the fetch to be dispatched", func() bool {
		return strings.Contains(p.Log(), fmt.Sprintf("key=1 version=12 correlation_id=%d", corr))
	})
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "the shutdown to start", func() bool {
		return strings.Contains(p.Log(), "shutting down")
	})
	// No new connections: a new one is closed without an answer.
	if late, err := dialAndAsk(p.Addr); err == nil {
		t.Fatalf("a connection opened during the shutdown was answered: %+v", late)
	}
	got, _, err := c.Read(10 * time.Second)
	if err != nil || got != corr {
		t.Fatalf("the in-flight fetch was not answered during shutdown: corr %d, %v", got, err)
	}
	code, err := p.Wait(30 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("exit code %d (%v), want 0\n%s", code, err, p.Log())
	}
	if !strings.Contains(p.Log(), "stopped") {
		t.Fatalf("no clean stop logged:\n%s", p.Log())
	}
	for _, part := range []string{"term-0", "term-1"} {
		if _, err := os.Stat(filepath.Join(dir, part, ".clean-shutdown")); err != nil {
			t.Fatalf("%s was not shut down cleanly: %v", part, err)
		}
	}

	p = brokertest.Serve(t, dir)
	n := 0
	rc := brokertest.Client(t, p.Addr, kgo.ConsumeTopics("term"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n < 100 {
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 100 records after the restart", n)
		}
		n += len(fs.Records())
	}
}

// dialAndAsk opens a connection and sends ApiVersions; it returns the
// answer's size, or an error if the connection is refused or closed
// first.
func dialAndAsk(addr string) (int, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	if _, err := nc.Write(frame); err != nil {
		return 0, err
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return 0, err
	}
	return int(binary.BigEndian.Uint32(size[:])), nil
}

// TestCrashDurability streams with acks=all to a `kaas serve` process and
// SIGKILLs it mid-stream, several rounds on one data directory: every
// acknowledged record is there exactly once after each restart, in
// produce order within its partition, and every segment ends at a whole
// batch.
func TestCrashDurability(t *testing.T) {
	const (
		rounds     = 3
		partitions = 3
		perRound   = 3000 // acknowledged records before the kill
	)
	dir := t.TempDir()
	var mu sync.Mutex
	acked := map[string]bool{}
	for round := 0; round < rounds; round++ {
		p := brokertest.Serve(t, dir)
		if round == 0 {
			brokertest.CreateTopic(t, p.Addr, "crash", partitions, map[string]*string{"internal.segment.bytes": kmsg.StringPtr("65536")})
		}
		checkAcked(t, p.Addr, acked, partitions)

		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), kgo.DefaultProduceTopic("crash"),
			kgo.ProducerLinger(time.Millisecond), kgo.RequestRetries(2), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := brokertest.Context(t, time.Minute)
		done := make(chan struct{})
		roundAcked := 0
		go func() {
			defer close(done)
			for i := 0; ctx.Err() == nil; i++ {
				v := fmt.Sprintf("r%d-%07d", round, i)
				cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 97)), Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err == nil {
						mu.Lock()
						acked[string(r.Value)] = true
						roundAcked++
						mu.Unlock()
					}
				})
				select {
				case <-p.Done():
					return
				default:
				}
			}
		}()
		brokertest.Eventually(t, time.Minute, "records to be acknowledged", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return roundAcked >= perRound
		})
		p.Kill()   // mid-stream: the producer has batches in flight
		cl.Close() // fails what was never acknowledged, unblocks Produce
		<-done
		room := 0
		for part := 0; part < partitions; part++ {
			partDir := filepath.Join(dir, fmt.Sprintf("crash-%d", part))
			if _, err := os.Stat(filepath.Join(partDir, ".clean-shutdown")); err == nil {
				t.Fatal("a SIGKILLed broker left a clean-shutdown marker")
			}
			if endsInZeros(t, partDir) {
				room++
			}
		}
		if room == 0 {
			// The next start recovers through preallocated room: a
			// zero tail is the log's end, never data.
			t.Fatal("no active segment ended in preallocated zeros when the broker was killed")
		}
	}
	p := brokertest.Serve(t, dir)
	checkAcked(t, p.Addr, acked, partitions)
	t.Logf("%d acknowledged records over %d SIGKILLed rounds, all present once", len(acked), rounds)
	for part := 0; part < partitions; part++ {
		brokertest.CheckWholeBatches(t, filepath.Join(dir, fmt.Sprintf("crash-%d", part)))
	}
}

// endsInZeros reports whether the last segment of a partition directory
// ends in a page of zeros (the room preallocated after its last batch).
func endsInZeros(t *testing.T, partDir string) bool {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(partDir, "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments in %s (%v)", partDir, err)
	}
	sort.Strings(segs)
	data, err := os.ReadFile(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	return len(data) >= 4096 && len(bytes.Trim(data[len(data)-4096:], "\x00")) == 0
}

// checkAcked reads every partition to its end and checks each acknowledged
// value appears exactly once, and that values of one round appear in
// produce order within a partition.
func checkAcked(t *testing.T, addr string, acked map[string]bool, partitions int) {
	t.Helper()
	adm := brokertest.Admin(t, addr)
	ctx := brokertest.Context(t, time.Minute)
	ends, err := adm.ListEndOffsets(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	seen := map[string]int{}
	if total > 0 {
		cl := brokertest.Client(t, addr, kgo.ConsumeTopics("crash"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		last := map[string]int{} // partition/round → last sequence
		read := int64(0)
		for read < total {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records", read, total)
			}
			fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				read++
				v := string(r.Value)
				seen[v]++
				var round, seq int
				fmt.Sscanf(v, "r%d-%d", &round, &seq)
				key := fmt.Sprintf("%d/%d", r.Partition, round)
				if prev, ok := last[key]; ok && seq <= prev {
					t.Fatalf("partition %d: %s after sequence %d", r.Partition, v, prev)
				}
				last[key] = seq
			})
		}
		cl.Close()
	}
	missing := 0
	for v := range acked {
		switch seen[v] {
		case 1:
		case 0:
			missing++
		default:
			t.Errorf("acknowledged record %s appears %d times", v, seen[v])
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records are missing after the crash", missing, len(acked))
	}
}
