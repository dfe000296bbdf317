package partition

import (
	"time"

	"kaas/messages"
)

// A TV2 batch at an epoch above that of its producer's transaction still
// open here belongs to a later transaction: the coordinator ended the
// open one (R-TV2-7: EndTxn is answered before its markers) or fenced it
// (a rejoin's or the reaper's abort), and its marker is on the way. The
// batch cannot be checked before that marker closes the transaction here:
// appended now it would land in the old transaction, and sent to the
// coordinator now (its implicit add waits there for the same markers) it
// would come back after a marker of its producer and be refused, costing
// the client a retry and its backoff on every transaction. So it waits
// here for the marker, with the producer's later batches queued behind it
// (held, produce_held.go), and then goes through produce again. The wait
// is bounded: if no marker comes within markerAwait (a hanging
// transaction, the coordinator gone), the batch goes on as it did before
// it waited: to the coordinator, which adds it or refuses it.

// markerAwait bounds the wait for a marker (as --txn-marker-wait bounds
// the coordinator's).
var markerAwait = 5 * time.Second // a variable for tests

// awaitMarker is an internal verifyTxn answer: wait for the marker of the
// producer's open transaction.
const awaitMarker int16 = -1001

// awaitCheck asks the actor to answer the batch of a producer that has
// waited markerAwait.
type awaitCheck struct {
	pid int64
	m   *messages.Produce
}

// awaitBehind parks m until a marker of pid is written here.
func (p *Partition) awaitBehind(pid int64, m *messages.Produce) {
	p.holdBehind(pid)
	if p.awaiting == nil {
		p.awaiting = make(map[int64]*messages.Produce)
	}
	p.awaiting[pid] = m
	sys, self := p.sys, p.self
	time.AfterFunc(markerAwait, func() { sys.Send(self, awaitCheck{pid: pid, m: m}) })
}

// markerCame releases pid's parked batch, and those held behind it, once
// a marker of pid is appended.
func (p *Partition) markerCame(pid int64) {
	m, ok := p.awaiting[pid]
	if !ok {
		return
	}
	delete(p.awaiting, pid)
	p.release(pid, func() { p.produce(m) })
}

// awaitExpired sends on a batch that waited markerAwait for a marker.
func (p *Partition) awaitExpired(c awaitCheck) {
	if m, ok := p.awaiting[c.pid]; !ok || m != c.m {
		return // released meanwhile
	}
	delete(p.awaiting, c.pid)
	p.logger().Info("a transactional batch waited too long for its producer's previous transaction's marker",
		"producer_id", c.pid, "waited", markerAwait)
	c.m.AwaitedMarker = true
	p.release(c.pid, func() { p.produce(c.m) })
}

// release runs first, then every batch held behind pid through produce,
// in order.
func (p *Partition) release(pid int64, first func()) {
	q := p.held[pid]
	delete(p.held, pid)
	delete(p.markedOut, pid)
	first()
	for _, next := range q {
		p.produce(next)
	}
}
