package partition

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/partlog"
)

// writeMarker appends a COMMIT or ABORT control batch for a producer
// (R-MRK-4/5) and answers once it is durable. An ABORT that closes a
// transaction open here is also recorded in the segment's .txnindex.
func (p *Partition) writeMarker(m *messages.WriteMarker) {
	if !p.open() {
		m.NotLeader()
		return
	}
	if p.log.Failed() != nil {
		m.Reply(kerr.KafkaStorageError.Code)
		return
	}
	if code := p.producers.CheckMarker(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch); code != 0 {
		m.Reply(code)
		return
	}
	now := time.Now()
	batch := partlog.BuildMarker(m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch, now.UnixMilli())
	partlog.SetPartitionLeaderEpoch(batch, p.cfg.LeaderEpoch)
	h, err := p.log.Append(batch, now)
	if err != nil {
		p.fail(err)
		m.Reply(kerr.KafkaStorageError.Code)
		return
	}
	p.markerGen++
	p.markWhileOut(m.ProducerID) // its batch out at the coordinator verifies again
	p.settleMarker(h, m.Commit, m.CoordinatorEpoch)
	p.afterWrite()
	delete(p.recoveredTxns, m.ProducerID) // its open transaction here is closed
	p.markerCame(m.ProducerID)            // a later transaction's batch waiting for it goes on
	p.await(h.NextOffset(), func(durable bool) {
		if !p.open() {
			m.NotLeader()
			return
		}
		if !durable {
			m.Reply(kerr.KafkaStorageError.Code)
			return
		}
		m.Reply(0)
	})
}

// settleMarker applies an appended marker to producer state and the
// aborted-transaction index; recovery replays markers through it too.
func (p *Partition) settleMarker(h partlog.BatchHeader, commit bool, coordinatorEpoch int32) {
	done, closed := p.producers.ApplyMarker(h.ProducerID, h.ProducerEpoch, coordinatorEpoch, h.BaseOffset, h.MaxTimestamp)
	if !closed {
		return
	}
	if !commit {
		lso := p.producers.OpenTxnFirstOffset()
		if lso < 0 {
			lso = done.LastOffset + 1
		}
		err := p.log.AppendAborted(partlog.AbortedTxn{
			ProducerID: done.ProducerID, FirstOffset: done.FirstOffset, LastOffset: done.LastOffset, LastStableOffset: lso,
		})
		if err != nil {
			// Offline: the marker's own acknowledgement fails with it.
			p.fail(err)
		}
	}
	p.unsettled = append(p.unsettled, done)
}
