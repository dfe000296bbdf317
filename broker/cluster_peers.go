package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/broker/peers"
	"kaas/model"
	"kaas/model/slots"
	"kaas/state/ownership"
)

// newPeers makes the peer client of a cluster broker. Its seed is this
// broker's own inter-broker listener (addrs: listener name → advertised
// address).
func (b *Broker) newPeers(addrs map[string]string) (*peers.Client, error) {
	l := b.cfg.interBrokerListener()
	cfg := peers.Config{BrokerID: b.cfg.BrokerID, Seed: addrs[l.Name], Secret: b.peerSecret,
		Logger: b.log, Owners: peerOwners{b}}
	if l.Protocol.TLS() {
		tc, err := b.peerTLS()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	return peers.New(cfg)
}

// peerOwners is the cluster's ownership as the peer client reads it.
type peerOwners struct{ b *Broker }

func (o peerOwners) PartitionLeader(topic string, partition int32) (int32, bool) {
	leader, _, ok := o.b.partitionOwner(topic, partition)
	return leader, ok
}

func (o peerOwners) TxnCoordinator(txnID string) (int32, bool) {
	return o.b.slotOwner(ownership.TxnSlotUnit(slots.Of(txnID)))
}

func (o peerOwners) VerifyHere(txnID string, pid int64, epoch int16, topic string, partition int32) int16 {
	if co := o.b.coordinating(); co != nil && co.txnOwned[slots.Of(txnID)].Load() {
		return co.txns.VerifyTxn(txnID, pid, epoch, topic, partition)
	}
	return kerr.NotEnoughReplicas.Code // still opening: the producer retries
}

func (o peerOwners) AddHere(txnID string, pid int64, epoch int16, tp model.TopicPartition, done func(code int16)) {
	if co := o.b.coordinating(); co != nil && co.txnOwned[slots.Of(txnID)].Load() {
		o.b.addLocally(co.txns, txnID, pid, epoch, tp, time.Time{}, done)
		return
	}
	done(kerr.NotEnoughReplicas.Code) // still opening: the producer retries
}
