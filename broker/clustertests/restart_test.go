package clustertests

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
	"kaas/model/slots"
	"kaas/state/ownership"
)

// A graceful rolling restart of all three brokers under load (SIGTERM,
// as Kubernetes sends): each hands its partitions off before it exits, so
// a franz-go producer with default retries sees no error, and every
// acknowledged record is read back exactly once.
func TestClusterRollingRestart(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts = "rolling", 12
	c.createTopic(topic, parts)
	c.leaders(topic, parts)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	l := startLoad(t, cl)
	for _, id := range []int32{1, 2, 3} {
		l.progress(t, 50, "records acknowledged before the restart")
		m := c.brokers[id]
		if err := m.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, err := m.proc.Wait(60 * time.Second); err != nil || code != 0 {
			t.Fatalf("broker %d: exit %d, %v\n%s", id, code, err, m.proc.Log())
		}
		c.restart(id)
		c.waitMembers(3)
		c.leaders(topic, parts)
	}
	l.progress(t, 50, "records acknowledged after the last restart")
	n := l.finish(t, c, topic)
	t.Logf("%d records acknowledged and read back exactly once across a rolling restart", n)
}

// The deposed owner: a broker stopped (SIGSTOP) for longer than its
// session TTL under produce load loses its partitions to its peers at a
// higher epoch; when it continues (SIGCONT) it finds its lease gone,
// acknowledges nothing more, gives its partitions up without writing to
// them, and rejoins. Every acknowledged record is read back exactly once,
// and a restart of every broker recovers the same logs. The same holds
// for a group-offsets slot it coordinated under a stream of offset
// commits: the slot moves to a peer, which seals the slot's file (a new
// generation) before reading it, so nothing the stopped broker writes
// late is read back; after every broker restarts, the group's offset is
// the last one acknowledged (or a later attempt), never an older one.
func TestClusterDeposedOwner(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts = "deposed", 12
	c.createTopic(topic, parts)
	before := c.leaders(topic, parts)
	l := startLoad(t, c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0)))
	commits := startCommits(t, c, topic, 2)
	l.progress(t, 100, "records acknowledged before the stop")
	commits.progress(t, 20, "offset commits acknowledged before the stop")
	victim := c.brokers[2]
	if err := victim.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	after := c.leaders(topic, parts, 2)
	for p, le := range after {
		if before[p][0] == 2 && le[1] <= before[p][1] {
			t.Fatalf("partition %d moved from the stopped broker without a higher epoch: %v → %v", p, before[p], le)
		}
	}
	for p, le := range after {
		if before[p][0] == 2 {
			c.checkLeaderEpochs(topic, p, le[0], le[1]) // the old epoch is fenced
			break
		}
	}
	l.progress(t, 100, "records acknowledged while the old owner is stopped")
	brokertest.Eventually(t, 30*time.Second, "the group's slot taken over", func() bool {
		return c.groupCoordinatorOf(commits.group) != 2
	})
	commits.progress(t, 20, "offset commits acknowledged by the new coordinator")
	if d := time.Since(stopped); d < 3*time.Second {
		time.Sleep(3*time.Second - d) // stopped well past its 2 s TTL
	}
	if err := victim.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// It finds its lease gone, abandons its partitions without writing,
	// and joins again with a new lease.
	brokertest.Eventually(t, 30*time.Second, "the old owner to notice its lease is gone", func() bool {
		return strings.Contains(victim.proc.Log(), "session lease lost")
	})
	c.waitMembers(3)
	c.leaders(topic, parts)
	l.progress(t, 100, "records acknowledged after the old owner came back")
	n := l.finish(t, c, topic)
	acked, attempted := commits.finish(t)

	// Every broker restarts (gracefully): the logs recover the same.
	ends := c.endOffsets(topic)
	for _, id := range []int32{1, 2, 3} {
		m := c.brokers[id]
		_ = m.proc.Signal(syscall.SIGTERM)
		if _, err := m.proc.Wait(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int32{1, 2, 3} {
		c.restart(id)
	}
	c.waitMembers(3)
	c.leaders(topic, parts)
	if again := c.endOffsets(topic); fmt.Sprint(again) != fmt.Sprint(ends) {
		t.Fatalf("end offsets before the restart %v, after %v", ends, again)
	}
	got := commits.committed(t)
	if got < acked || got > attempted {
		t.Fatalf("group %s's committed offset after the restarts is %d; acknowledged up to %d, attempted up to %d", commits.group, got, acked, attempted)
	}
	// The slot's file is one generation: every takeover sealed the one
	// before (storage/slotlog generations).
	files, _ := filepath.Glob(filepath.Join(c.dataDir, "__cluster", "offsets", fmt.Sprintf("slot-%02d.*", slots.Of(commits.group))))
	if len(files) != 1 || !strings.Contains(filepath.Base(files[0]), ".g") {
		t.Fatalf("offsets slot files of group %s: %v", commits.group, files)
	}
	t.Logf("%d records acknowledged and read back exactly once; logs recovered the same; offset commit %d of %d acknowledged, %d after the restarts (%s)",
		n, acked, attempted, got, filepath.Base(files[0]))
}

// commitStream commits ever higher offsets for one partition of a group
// whose offsets slot a given broker owns, one commit at a time.
type commitStream struct {
	group, topic string
	adm          *kadm.Client
	acked        atomic.Int64 // the highest offset whose commit was acknowledged
	attempted    atomic.Int64 // the highest offset sent
	stop         chan struct{}
	done         chan struct{}
}

// startCommits streams commits for a group coordinated by broker owner.
func startCommits(t *testing.T, c *cluster, topic string, owner int32) *commitStream {
	s := &commitStream{topic: topic, adm: c.admin(), stop: make(chan struct{}), done: make(chan struct{})}
	for i := 0; s.group == ""; i++ {
		g := fmt.Sprintf("deposed-group-%d", i)
		if ownership.Owner(ownership.OffsetsSlotUnit(slots.Of(g)), []int32{1, 2, 3}) == owner {
			s.group = g
		}
	}
	brokertest.Eventually(t, 30*time.Second, "group "+s.group+" coordinated by its owner", func() bool {
		return c.groupCoordinatorOf(s.group) == owner
	})
	go func() {
		defer close(s.done)
		for n := int64(1); ; n++ {
			select {
			case <-s.stop:
				return
			default:
			}
			s.attempted.Store(n)
			var o kadm.Offsets
			o.AddOffset(topic, 0, n, -1)
			resp, err := s.adm.CommitOffsets(brokertest.Context(t, 30*time.Second), s.group, o)
			if err == nil && resp.Ok() {
				s.acked.Store(n)
			}
		}
	}()
	return s
}

func (s *commitStream) progress(t *testing.T, n int64, what string) {
	t.Helper()
	from := s.acked.Load()
	brokertest.Eventually(t, 60*time.Second, what, func() bool { return s.acked.Load() >= from+n })
}

// finish stops the stream and returns the highest acknowledged and the
// highest attempted offset.
func (s *commitStream) finish(t *testing.T) (acked, attempted int64) {
	close(s.stop)
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the offset commit stream did not stop")
	}
	return s.acked.Load(), s.attempted.Load()
}

// committed fetches the group's committed offset.
func (s *commitStream) committed(t *testing.T) int64 {
	t.Helper()
	var at int64 = -1
	brokertest.Eventually(t, 30*time.Second, "group "+s.group+"'s committed offset", func() bool {
		got, err := s.adm.FetchOffsets(brokertest.Context(t, 5*time.Second), s.group)
		if err != nil || got.Error() != nil {
			return false
		}
		o, ok := got.Lookup(s.topic, 0)
		at = o.At
		return ok
	})
	return at
}
