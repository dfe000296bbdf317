package partition

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/metrics/events"
	"kaas/storage/partlog"
)

// noteZombie records a batch refused because its producer epoch is no
// longer the one in force (a zombie of an earlier session, KIP-360) in
// the events journal. Only called on the reject path, so accepted
// batches pay nothing for it.
func (p *Partition) noteZombie(h partlog.BatchHeader, code int16) {
	if p.cfg.Events == nil || !h.HasProducerID() || (code != kerr.InvalidProducerEpoch.Code && code != kerr.ProducerFenced.Code) {
		return
	}
	inForce := int16(-1)
	if e := p.producers.Entry(h.ProducerID); e != nil {
		inForce = e.Epoch
	}
	if f, ok := p.cfg.Floors.Get(h.ProducerID); ok && f > inForce {
		inForce = f
	}
	p.cfg.Events.Record(events.Event{
		Kind: events.ZombieRejected, ProducerID: h.ProducerID, Epoch: h.ProducerEpoch, PrevEpoch: inForce,
		Where: actorName(p.cfg.Topic, p.cfg.Partition), Code: kerr.TypedErrorForCode(code).Message,
	})
}
