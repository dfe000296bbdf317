// Package peers is a cluster broker's client side towards its peers.
//
// Broker-to-broker requests in a cluster, over the Kafka protocol as
// Apache's brokers send them: transaction markers to a partition's
// current leader (WriteTxnMarkers, key 27) and KIP-890 verification of a
// transactional batch with its transaction's coordinator
// (AddPartitionsToTxn v4, verify only, batched per coordinator). The
// requests go through one franz-go client pinned to a broker id per
// request; it learns the live brokers' addresses from this cluster's own
// Metadata, and a failed dial makes it look them up again.
//
// Peers connect to each other's inter-broker listener
// (--inter-broker-listener-name, else the first listener) at the address
// each registered for it: over TLS when that listener is SSL or SASL_SSL,
// verifying the peer's certificate (--inter-broker-tls-ca, else
// --tls-client-ca, else the system roots) and presenting this broker's
// own certificate, for listeners that require client certificates. They
// authenticate with KAAS-PEER (broker/auth/peer.go).
package peers

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/messages"
	"kaas/model"
)

// Config is what the client needs of the broker it serves.
type Config struct {
	BrokerID int32
	// Seed is this broker's own inter-broker listener's address, whose
	// Metadata lists every live member at its address on that listener.
	Seed string
	// Secret is the cluster's peer secret (KAAS-PEER).
	Secret string
	// TLS, if set, is the configuration peers are dialled with (an SSL or
	// SASL_SSL inter-broker listener).
	TLS    *tls.Config
	Logger *slog.Logger
	Owners Owners
}

// Owners is what the client reads of the cluster's ownership.
type Owners interface {
	// PartitionLeader is the broker leading a partition now; ok false
	// between owners.
	PartitionLeader(topic string, partition int32) (leader int32, ok bool)
	// TxnCoordinator is the broker owning txnID's transaction slot.
	TxnCoordinator(txnID string) (coordinator int32, ok bool)
	// VerifyHere verifies a transactional batch on this broker, which
	// became txnID's coordinator since the partition asked: 0, the
	// produce error, or NOT_ENOUGH_REPLICAS while the slot still opens.
	VerifyHere(txnID string, pid int64, epoch int16, topic string, partition int32) int16
	// AddHere adds tp to txnID's TV2 transaction on this broker, which
	// became its coordinator since the partition asked; done as VerifyHere.
	AddHere(txnID string, pid int64, epoch int16, tp model.TopicPartition, done func(code int16))
}

// peerTimeout bounds one request to a peer; the caller retries.
const peerTimeout = 10 * time.Second

// Client is the cluster broker's client side towards its peers.
type Client struct {
	cfg Config
	cl  *kgo.Client

	verify  *perBroker[*verification] // by coordinator broker id
	markers *perBroker[*peerMarker]   // by leader broker id

	markersInFlight atomic.Int64
	markersSent     atomic.Int64
	markerRequests  atomic.Int64
	verifications   atomic.Int64
	endFences       atomic.Int64
	failures        atomic.Int64
}

type verification struct {
	txnID string
	pid   int64
	epoch int16
	tp    model.TopicPartition
	// add: a TV2 implicit add (R-TV2-5/6), sent as AddPartitionsToTxn v5
	// with VerifyOnly false; else a verification (v4, verify only).
	add  bool
	done func(code int16)
}

// New makes the client; it dials nothing until the first request.
func New(cfg Config) (*Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Seed),
		kgo.ClientID(fmt.Sprintf("kaas-broker-%d", cfg.BrokerID)),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.SASL(auth.PeerSASL(cfg.Secret)),
	}
	if cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg.TLS))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("peer client: %w", err)
	}
	p := &Client{cfg: cfg, cl: cl}
	p.verify = newPerBroker(p.sendVerifications)
	p.markers = newPerBroker(p.sendMarkers)
	return p, nil
}

// Close closes the client (nil: nothing to close).
func (p *Client) Close() {
	if p != nil {
		p.cl.Close()
	}
}

// MarkersInFlight, MarkersSent, MarkerRequests, Verifications and
// Failures count what the client did, for /metrics.
func (p *Client) MarkersInFlight() int64 { return p.markersInFlight.Load() }
func (p *Client) MarkersSent() int64     { return p.markersSent.Load() }
func (p *Client) MarkerRequests() int64  { return p.markerRequests.Load() }
func (p *Client) Verifications() int64   { return p.verifications.Load() }
func (p *Client) Failures() int64        { return p.failures.Load() }

// request sends req to broker id and returns its response; on a failure
// the broker addresses are looked up again before the caller's retry.
// Request sends req to peer broker id, bounded by peerTimeout; a failure
// is counted, logged and refreshes the client's metadata.
func (p *Client) Request(id int32, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	resp, err := p.cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		p.failures.Add(1)
		p.cl.ForceMetadataRefresh()
		p.cfg.Logger.Warn("request to a peer broker failed", "peer", id, "api", kmsg.NameForKey(req.Key()), "err", err)
	}
	return resp, err
}

// peerMarker is one marker on its way to the partition's leader.
type peerMarker struct {
	tp model.TopicPartition
	m  *messages.WriteMarker
}

// WriteMarker delivers a transaction marker to the partition's current
// leader, a peer (R-MRK-1 across brokers), in one WriteTxnMarkers request
// with every other marker waiting for that broker (Apache's
// TransactionMarkerChannelManager sends one request per broker). Any
// failure — no leader between owners, the leader moved
// (NOT_LEADER_OR_FOLLOWER), the peer unreachable — is answered with a
// retriable code: the coordinator sends the marker again after its
// backoff, to whoever leads the partition then, until it is written. No
// marker is dropped.
func (p *Client) WriteMarker(tp model.TopicPartition, m *messages.WriteMarker) {
	leader, ok := p.cfg.Owners.PartitionLeader(tp.Topic, tp.Partition)
	if !ok || leader == p.cfg.BrokerID {
		// Between owners, or this broker is claiming it right now.
		m.Reply(kerr.NotLeaderForPartition.Code)
		return
	}
	p.markersInFlight.Add(1)
	p.markers.add(leader, &peerMarker{tp: tp, m: m})
}

// markerKey groups the markers of one transaction: one marker entry of
// the request, with all its partitions led by the destination.
type markerKey struct {
	pid              int64
	epoch            int16
	commit           bool
	coordinatorEpoch int32
}

// sendMarkers sends one WriteTxnMarkers request to leader with every
// marker of batch and answers each with its partition's code. A second
// marker for a producer's partition already in the request waits for the
// next one (the response could not tell the two apart).
func (p *Client) sendMarkers(leader int32, batch []*peerMarker) (later []*peerMarker) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	entry := map[markerKey]int{}
	type pidTP struct {
		pid int64
		tp  model.TopicPartition
	}
	seen := map[pidTP]bool{}
	var sent []*peerMarker
	for _, pm := range batch {
		m := pm.m
		if seen[pidTP{m.ProducerID, pm.tp}] {
			later = append(later, pm)
			continue
		}
		seen[pidTP{m.ProducerID, pm.tp}] = true
		k := markerKey{m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch}
		i, ok := entry[k]
		if !ok {
			i = len(req.Markers)
			entry[k] = i
			wm := kmsg.NewWriteTxnMarkersRequestMarker()
			wm.ProducerID, wm.ProducerEpoch, wm.Committed, wm.CoordinatorEpoch = k.pid, k.epoch, k.commit, k.coordinatorEpoch
			req.Markers = append(req.Markers, wm)
		}
		addMarkerPartition(&req.Markers[i], pm.tp)
		sent = append(sent, pm)
	}
	p.markerRequests.Add(1)
	p.markersSent.Add(int64(len(sent)))
	resp, err := p.Request(leader, req)
	for _, pm := range sent {
		code := kerr.NetworkException.Code
		if err == nil {
			code = markerCode(resp.(*kmsg.WriteTxnMarkersResponse), pm.m.ProducerID, pm.tp)
		}
		p.markersInFlight.Add(-1)
		pm.m.Reply(code)
	}
	return later
}

func addMarkerPartition(wm *kmsg.WriteTxnMarkersRequestMarker, tp model.TopicPartition) {
	for i := range wm.Topics {
		if wm.Topics[i].Topic == tp.Topic {
			wm.Topics[i].Partitions = append(wm.Topics[i].Partitions, tp.Partition)
			return
		}
	}
	t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
	wm.Topics = append(wm.Topics, t)
}

func markerCode(resp *kmsg.WriteTxnMarkersResponse, pid int64, tp model.TopicPartition) int16 {
	for _, rm := range resp.Markers {
		if rm.ProducerID != pid {
			continue
		}
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

// VerifyTxn asks the transaction's coordinator (a peer) whether tp is in
// the producer's ongoing transaction, and calls done with 0 or the
// produce error: what the coordinator answered for the partition, or
// NOT_ENOUGH_REPLICAS (retriable, as Apache's AddPartitionsToTxnManager
// answers) when it cannot be asked.
func (p *Client) VerifyTxn(txnID string, pid int64, epoch int16, tp model.TopicPartition, done func(code int16)) {
	p.askCoordinator(&verification{txnID: txnID, pid: pid, epoch: epoch, tp: tp, done: done})
}

// AddToTxn asks the transaction's coordinator (a peer) to add tp to the
// producer's TV2 transaction (R-TV2-5/6), with VerifyTxn's answers.
func (p *Client) AddToTxn(txnID string, pid int64, epoch int16, tp model.TopicPartition, done func(code int16)) {
	p.askCoordinator(&verification{txnID: txnID, pid: pid, epoch: epoch, tp: tp, add: true, done: done})
}

func (p *Client) askCoordinator(v *verification) {
	txnID, pid, epoch, tp, done := v.txnID, v.pid, v.epoch, v.tp, v.done
	coordinator, ok := p.cfg.Owners.TxnCoordinator(txnID)
	if !ok {
		done(kerr.NotEnoughReplicas.Code)
		return
	}
	if coordinator == p.cfg.BrokerID {
		// Claimed since the partition asked: verify here (or, still
		// opening, have the producer retry).
		if v.add {
			p.cfg.Owners.AddHere(txnID, pid, epoch, tp, done)
			return
		}
		done(p.cfg.Owners.VerifyHere(txnID, pid, epoch, tp.Topic, tp.Partition))
		return
	}
	p.verifications.Add(1)
	p.verify.add(coordinator, v)
}

// sendVerifications sends one AddPartitionsToTxn v4 with a verify-only
// transaction per transactional id of the batch (a second producer
// session of one id waits for the next request).
func (p *Client) sendVerifications(coordinator int32, batch []*verification) (later []*verification) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	// v5 for adds (TV2, R-TV2-5): a v4 add would start a classic
	// transaction; verifications stay v4 for older peers' sake.
	req.Version = 4
	for _, v := range batch {
		if v.add {
			req.Version = 5
		}
	}
	byID := map[string]int{}
	var sent []*verification
	for _, v := range batch {
		i, ok := byID[v.txnID]
		if !ok {
			i = len(req.Transactions)
			byID[v.txnID] = i
			t := kmsg.NewAddPartitionsToTxnRequestTransaction()
			t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = v.txnID, v.pid, v.epoch, !v.add
			req.Transactions = append(req.Transactions, t)
		}
		t := &req.Transactions[i]
		if t.ProducerID != v.pid || t.ProducerEpoch != v.epoch || t.VerifyOnly == v.add {
			later = append(later, v)
			continue
		}
		addTopicPartition(t, v.tp)
		sent = append(sent, v)
	}
	resp, err := p.Request(coordinator, req)
	if err != nil {
		for _, v := range sent {
			v.done(kerr.NotEnoughReplicas.Code)
		}
		return later
	}
	r := resp.(*kmsg.AddPartitionsToTxnResponse)
	for _, v := range sent {
		v.done(verifiedCode(r, v))
	}
	return later
}

func addTopicPartition(t *kmsg.AddPartitionsToTxnRequestTransaction, tp model.TopicPartition) {
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
