package broker

// An InitProducerId bump fences the old epoch on every local partition at
// the same time as it persists the bumped entry (actors/txn do: the fence
// and the write start together), so the answer waits for the longer of
// the two instead of their sum. Fencing before the entry is durable is
// safe: a fence only refuses epochs below one the coordinator has
// decided to hand out, and a bump whose fsync fails hands nothing out
// (R-IPI-11, R-IPI-13, R-FEN-3). These tests hold and fail the bump's
// transaction state fsync on the real wire path.

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model/txnstate"
	"kaas/storage/vfs"
	"kaas/storage/vfs/errorfs"
)

// holdTxnStateSync makes the next fsync of a transaction state slot log
// wait until the returned release is called; held is closed once it
// waits. Later fsyncs of the slot logs run as usual.
func holdTxnStateSync(efs *errorfs.FS) (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	efs.Set(func(op errorfs.Op) error {
		if op.Kind == errorfs.Sync && strings.Contains(op.Path, "txn_state") {
			once.Do(func() {
				close(h)
				<-r
			})
		}
		return nil
	})
	var rel sync.Once
	return h, func() { rel.Do(func() { close(r) }) }
}

// setupCommittedProducer gives the scenario's transactional id the
// producer (P,1) with a committed transaction on a-0, its Complete record
// durable: the next IPI{} bumps it to (P,2).
func setupCommittedProducer(t *testing.T, s *scenarioBroker, c *scenarioConn) int64 {
	t.Helper()
	p, _ := c.initTxn()
	wantIPI(t, "IPI{} → (P,1)", c.ipi(ipiReq(-1, -1)), 0, p, 1)
	c.aptOK(p, 1, a0)
	c.produceOK(pr{tp: a0, pid: p, ep: 1, seq: 0, txn: true}, 0)
	wantCode(t, "END{P,1,commit}", c.end(p, 1, true), 0)
	s.wantEntry(p, 1, p, -1, txnstate.CompleteCommit)
	return p
}

// A zombie batch at the old epoch that arrives while the bump's entry is
// still being fsynced is refused (the fence is already in force), the
// answer waits for the fsync, and the zombie stays refused after it.
func TestZombieRefusedWhileTheBumpIsBeingPersisted(t *testing.T) {
	efs := errorfs.Wrap(vfs.OS)
	s := startScenario(t, func(c *Config) { c.FS = efs })
	c := s.conn()
	p := setupCommittedProducer(t, s, c)

	held, release := holdTxnStateSync(efs)
	t.Cleanup(release) // before the broker stops
	bump := s.conn().async(ipiReq(-1, -1))
	<-held
	eventually(t, "the fence (P,2) in force", func() bool {
		e, ok := s.b.floors.Get(p)
		return ok && e >= 2
	})
	c.produceCode(pr{tp: a0, pid: p, ep: 1, seq: 1}, errInvalidEpoch)
	c.produceCode(pr{tp: a1, pid: p, ep: 1, seq: 0}, errInvalidEpoch) // never touched by P
	select {
	case r := <-bump:
		t.Fatalf("IPI answered %+v while its entry's fsync was still running", r)
	default:
	}

	release()
	r, _ := (<-bump).(*kmsg.InitProducerIDResponse)
	if r == nil {
		t.Fatal("no answer to the bump")
	}
	wantIPI(t, "IPI{} → (P,2) once durable", r, 0, p, 2)
	s.wantEntry(p, 2, p, -1, txnstate.Empty)
	c.produceCode(pr{tp: a0, pid: p, ep: 1, seq: 1}, errInvalidEpoch)
	c.produceCode(pr{tp: a2, pid: p, ep: 1, seq: 0}, errInvalidEpoch)
	c.aptOK(p, 2, a2)
	c.produceOK(pr{tp: a2, pid: p, ep: 2, seq: 0, txn: true}, 0)
}

// A bump whose entry's fsync fails answers COORDINATOR_NOT_AVAILABLE with
// no producer id or epoch: the epoch is not handed out. The fence that
// raced the fsync stays (the old epoch's holder is refused, which the
// bump was for); after a restart a bump succeeds, and its epoch is
// usable from sequence 0.
func TestBumpWhoseFsyncFailsHandsOutNoEpoch(t *testing.T) {
	efs := errorfs.Wrap(vfs.OS)
	s := startScenario(t, func(c *Config) { c.FS = efs })
	c := s.conn()
	p := setupCommittedProducer(t, s, c)

	efs.Set(errorfs.Nth(errorfs.On(errorfs.Sync, "txn_state"), 1, 1, syscall.EIO))
	wantIPI(t, "IPI{} whose fsync fails", c.ipi(ipiReq(-1, -1)), kerr.CoordinatorNotAvailable.Code, -1, -1)
	efs.Set(nil)
	if e, ok := s.entry(scnTxnID); !ok || e.Epoch != 1 {
		t.Fatalf("durable entry after the failed bump: %+v (present %v), want epoch 1", e, ok)
	}
	c.produceCode(pr{tp: a0, pid: p, ep: 1, seq: 1}, errInvalidEpoch)
	// The slot log is offline until a restart (storage/slotlog): the
	// claimed retry fails too rather than answering from memory.
	wantIPI(t, "claimed retry on the offline slot", c.ipi(ipiReq(p, 1)), kerr.CoordinatorNotAvailable.Code, -1, -1)

	// Close reports the failed fsync (nothing written since is known to
	// be durable); the restart recovers the slot from disk.
	for _, sc := range s.conns {
		sc.nc.Close()
	}
	s.conns = nil
	if err := s.b.Close(context.Background()); err == nil {
		t.Fatal("Close reported nothing after the transaction log's fsync failed")
	}
	s.b = nil
	s.start()
	c = s.conn()
	// The failed bump's record may have reached the disk all the same
	// (the fsync's outcome is unknown): the entry is at epoch 1 or 2, so
	// this bump answers 2 or 3. Epoch 2 was never answered before, so
	// either way no epoch is handed out twice.
	r := c.ipi(ipiReq(-1, -1))
	if r.ErrorCode != 0 || r.ProducerID != p || r.ProducerEpoch < 2 {
		t.Fatalf("IPI{} after a restart: %s (%d,%d), want (P,2) or (P,3)", codeName(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
	}
	ep := r.ProducerEpoch
	c.produceCode(pr{tp: a0, pid: p, ep: 1, seq: 1}, errInvalidEpoch)
	c.aptOK(p, ep, a1)
	c.produceOK(pr{tp: a1, pid: p, ep: ep, seq: 0, txn: true}, 0)
}
