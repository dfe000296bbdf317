package clustertests

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
)

// load produces distinct records to topic until stopped, counting what
// is acknowledged and what fails.
type load struct {
	acked    sync.Map
	nAcked   atomic.Int64
	nFailed  atomic.Int64
	firstErr atomic.Value
	stop     context.CancelFunc
	wg       sync.WaitGroup
	cl       *kgo.Client
}

func startLoad(t *testing.T, cl *kgo.Client) *load {
	l := &load{cl: cl}
	ctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	t.Cleanup(func() { l.stop(); l.wg.Wait() })
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("r-%d", i)
			cl.Produce(context.Background(), kgo.StringRecord(v), func(_ *kgo.Record, err error) {
				if err != nil {
					l.nFailed.Add(1)
					l.firstErr.CompareAndSwap(nil, fmt.Sprintf("produce %s: %v", v, err))
					return
				}
				l.acked.Store(v, true)
				l.nAcked.Add(1)
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return l
}

// progress waits for n more acknowledgements.
func (l *load) progress(t *testing.T, n int64, what string) {
	t.Helper()
	floor := l.nAcked.Load()
	brokertest.Eventually(t, 45*time.Second, what, func() bool { return l.nAcked.Load() >= floor+n })
}

// finish stops the load, flushes, and checks every acknowledged record is
// read back exactly once and no error reached the producer.
func (l *load) finish(t *testing.T, c *cluster, topic string) int {
	t.Helper()
	l.stop()
	l.wg.Wait()
	if err := l.cl.Flush(brokertest.Context(t, 90*time.Second)); err != nil {
		t.Fatal(err)
	}
	if l.nFailed.Load() > 0 {
		t.Fatalf("%d produce errors surfaced, first: %v", l.nFailed.Load(), l.firstErr.Load())
	}
	want := int(l.nAcked.Load())
	seen := c.readAll(topic, want)
	bad := 0
	l.acked.Range(func(k, _ any) bool {
		if seen[k.(string)] != 1 {
			bad++
			if bad < 5 {
				t.Errorf("%s acknowledged, read %d times", k, seen[k.(string)])
			}
		}
		return true
	})
	if bad > 0 {
		t.Fatalf("%d of %d acknowledged records not read exactly once", bad, want)
	}
	return want
}
