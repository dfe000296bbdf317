package broker

// Broker-to-broker requests in a cluster, over the Kafka protocol as
// Apache's brokers send them: transaction markers to a partition's
// current leader (WriteTxnMarkers, key 27) and KIP-890 verification of a
// transactional batch with its transaction's coordinator
// (AddPartitionsToTxn v4, verify only, batched per coordinator). The
// requests go through one franz-go client pinned to a broker id per
// request; it learns the live brokers' addresses from this cluster's own
// Metadata, and a failed dial makes it look them up again.
//
// Peer connections are plaintext and unauthenticated: a cluster whose
// listeners require SASL or TLS, or an authorizer that does not grant
// the brokers CLUSTER_ACTION, refuses them (not built yet; see README).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/messages"
	"kaas/state/ownership"
	"kaas/storage/slots"
	"kaas/storage/txnlog"
)

// peerTimeout bounds one request to a peer; the caller retries.
const peerTimeout = 10 * time.Second

// peers is the cluster broker's client side towards its peers.
type peers struct {
	b  *Broker
	cl *kgo.Client

	mu     sync.Mutex
	verify map[int32]*verifyQueue // by coordinator broker id

	markersInFlight atomic.Int64
	verifications   atomic.Int64
	failures        atomic.Int64
}

// verifyQueue gathers verifications for one coordinator: while a request
// is in flight, new ones wait and go together in the next.
type verifyQueue struct {
	busy    bool
	pending []*verification
}

type verification struct {
	txnID string
	pid   int64
	epoch int16
	tp    txnlog.TopicPartition
	done  func(code int16)
}

// newPeers makes the client; it dials nothing until the first request.
// seed is this broker's own advertised address (its Metadata lists every
// live member).
func newPeers(b *Broker, seed string) (*peers, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seed),
		kgo.ClientID(fmt.Sprintf("kaas-broker-%d", b.cfg.BrokerID)),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.SASL(peerSASL{secret: b.cluster.peerSecret}),
	)
	if err != nil {
		return nil, fmt.Errorf("peer client: %w", err)
	}
	return &peers{b: b, cl: cl, verify: map[int32]*verifyQueue{}}, nil
}

func (p *peers) close() {
	if p != nil {
		p.cl.Close()
	}
}

// request sends req to broker id and returns its response; on a failure
// the broker addresses are looked up again before the caller's retry.
func (p *peers) request(id int32, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	resp, err := p.cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		p.failures.Add(1)
		p.cl.ForceMetadataRefresh()
		p.b.log.Warn("request to a peer broker failed", "peer", id, "api", kmsg.NameForKey(req.Key()), "err", err)
	}
	return resp, err
}

// writeMarker delivers a transaction marker to the partition's current
// leader, a peer (R-MRK-1 across brokers). Any failure — no leader between
// owners, the leader moved (NOT_LEADER_OR_FOLLOWER), the peer unreachable
// — is answered with a retriable code: the coordinator sends the marker
// again after its backoff, to whoever leads the partition then, until it
// is written. No marker is dropped.
func (p *peers) writeMarker(tp txnlog.TopicPartition, m *messages.WriteMarker) {
	leader, _, ok := p.b.partitionOwner(tp.Topic, tp.Partition)
	if !ok || leader == p.b.cfg.BrokerID {
		// Between owners, or this broker is claiming it right now.
		m.Reply(kerr.NotLeaderForPartition.Code)
		return
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	wm := kmsg.NewWriteTxnMarkersRequestMarker()
	wm.ProducerID, wm.ProducerEpoch, wm.Committed, wm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
	wm.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{t}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{wm}
	p.markersInFlight.Add(1)
	go func() {
		defer p.markersInFlight.Add(-1)
		resp, err := p.request(leader, req)
		if err != nil {
			m.Reply(kerr.NetworkException.Code)
			return
		}
		m.Reply(markerCode(resp.(*kmsg.WriteTxnMarkersResponse), tp))
	}()
}

func markerCode(resp *kmsg.WriteTxnMarkersResponse, tp txnlog.TopicPartition) int16 {
	for _, rm := range resp.Markers {
		for _, t := range rm.Topics {
			for _, rp := range t.Partitions {
				if t.Topic == tp.Topic && rp.Partition == tp.Partition {
					return rp.ErrorCode
				}
			}
		}
	}
	return kerr.UnknownServerError.Code // retried
}

// verifyTxn asks the transaction's coordinator (a peer) whether tp is in
// the producer's ongoing transaction, and calls done with 0 or the
// produce error: what the coordinator answered for the partition, or
// NOT_ENOUGH_REPLICAS (retriable, as Apache's AddPartitionsToTxnManager
// answers) when it cannot be asked.
func (p *peers) verifyTxn(txnID string, pid int64, epoch int16, tp txnlog.TopicPartition, done func(code int16)) {
	coordinator, ok := p.b.slotOwner(ownership.TxnSlotUnit(slots.Of(txnID)))
	if !ok {
		done(kerr.NotEnoughReplicas.Code)
		return
	}
	if coordinator == p.b.cfg.BrokerID {
		// Claimed since the partition asked: verify here (or, still
		// opening, have the producer retry).
		if co := p.b.coordinating(); co != nil && co.txnOwned[slots.Of(txnID)].Load() {
			done(co.txns.VerifyTxn(txnID, pid, epoch, tp.Topic, tp.Partition))
		} else {
			done(kerr.NotEnoughReplicas.Code)
		}
		return
	}
	p.verifications.Add(1)
	v := &verification{txnID: txnID, pid: pid, epoch: epoch, tp: tp, done: done}
	p.mu.Lock()
	q := p.verify[coordinator]
	if q == nil {
		q = &verifyQueue{}
		p.verify[coordinator] = q
	}
	q.pending = append(q.pending, v)
	if q.busy {
		p.mu.Unlock()
		return
	}
	q.busy = true
	p.mu.Unlock()
	go p.drainVerifications(coordinator, q)
}

// drainVerifications sends what the queue holds, one request at a time,
// until it is empty.
func (p *peers) drainVerifications(coordinator int32, q *verifyQueue) {
	for {
		p.mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			q.busy = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.sendVerifications(coordinator, batch)
	}
}

// sendVerifications sends one AddPartitionsToTxn v4 with a verify-only
// transaction per transactional id of the batch (a second producer
// session of one id waits for the next request).
func (p *peers) sendVerifications(coordinator int32, batch []*verification) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	byID := map[string]int{}
	var later []*verification
	var sent []*verification
	for _, v := range batch {
		i, ok := byID[v.txnID]
		if !ok {
			i = len(req.Transactions)
			byID[v.txnID] = i
			t := kmsg.NewAddPartitionsToTxnRequestTransaction()
			t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = v.txnID, v.pid, v.epoch, true
			req.Transactions = append(req.Transactions, t)
		}
		t := &req.Transactions[i]
		if t.ProducerID != v.pid || t.ProducerEpoch != v.epoch {
			later = append(later, v)
			continue
		}
		addTopicPartition(t, v.tp)
		sent = append(sent, v)
	}
	if len(later) > 0 {
		p.mu.Lock()
		q := p.verify[coordinator]
		q.pending = append(later, q.pending...)
		p.mu.Unlock()
	}
	resp, err := p.request(coordinator, req)
	if err != nil {
		for _, v := range sent {
			v.done(kerr.NotEnoughReplicas.Code)
		}
		return
	}
	r := resp.(*kmsg.AddPartitionsToTxnResponse)
	for _, v := range sent {
		v.done(verifiedCode(r, v))
	}
}

func addTopicPartition(t *kmsg.AddPartitionsToTxnRequestTransaction, tp txnlog.TopicPartition) {
	for i := range t.Topics {
		if t.Topics[i].Topic == tp.Topic {
			t.Topics[i].Partitions = append(t.Topics[i].Partitions, tp.Partition)
			return
		}
	}
	rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
	t.Topics = append(t.Topics, rt)
}

// verifiedCode maps the coordinator's answer for v's partition onto the
// produce error R-PV-6 gives: a coordinator that cannot answer now
// (moved, loading, a transition in flight) is NOT_ENOUGH_REPLICAS, which
// producers retry; a fenced producer is INVALID_PRODUCER_EPOCH.
func verifiedCode(r *kmsg.AddPartitionsToTxnResponse, v *verification) int16 {
	code := r.ErrorCode
	if code == 0 {
		code = kerr.UnknownServerError.Code
		for _, t := range r.Transactions {
			if t.TransactionalID != v.txnID {
				continue
			}
			for _, rt := range t.Topics {
				for _, rp := range rt.Partitions {
					if rt.Topic == v.tp.Topic && rp.Partition == v.tp.Partition {
						code = rp.ErrorCode
					}
				}
			}
		}
	}
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.ConcurrentTransactions.Code, kerr.UnknownServerError.Code:
		return kerr.NotEnoughReplicas.Code
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
