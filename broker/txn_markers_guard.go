package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

// WriteTxnMarkers is a broker-to-broker API: transaction coordinators send
// it to the leaders of the partitions in a transaction. A client that
// could send it would write markers for other producers: an ABORT at
// producer epoch 32000 and coordinator epoch 2³⁰ raised a partition's
// floors so that the victim producer kept getting INVALID_PRODUCER_EPOCH
// even after re-initialising, and its own coordinator's markers were
// fenced (issue 9 row 11). Two checks keep that out, each in one small
// function the inter-broker work extends.

// markersAuthorized is who may send WriteTxnMarkers. With an authorizer,
// as Apache's handleWriteTxnMarkersRequest: ALTER on the cluster (not
// logged when denied), else CLUSTER_ACTION. Without one — the default —
// Apache lets anyone; kaas has no inter-broker connections yet to tell a
// broker from a client, so no connection may, unless
// --allow-client-txn-markers says so. Peer brokers' connections are to be
// let through here.
func (b *Broker) markersAuthorized(c *server.Call) bool {
	if b.sec.IsPeer(c) {
		return true // a broker of this cluster (broker/auth/peer.go)
	}
	a := b.sec.Access(c)
	if !a.On() {
		if !b.cfg.AllowClientTxnMarkers {
			b.log.Warn("WriteTxnMarkers refused: only brokers send it (--allow-client-txn-markers allows clients)",
				"remote", c.Remote, "client", c.ClientID)
			return false
		}
		return true
	}
	return a.Visible(acl.Alter, acl.Cluster, acl.ClusterName) || a.Cluster(acl.ClusterAction)
}

// markerBeyondIssued refuses a marker whose epochs no coordinator could
// have issued, so that even an authorized sender cannot raise a
// partition's floors past them:
//
//   - its producer epoch must be at most the producer's fence floor (0
//     without one): every epoch above 0 a coordinator hands out is fenced
//     on every partition of this broker (the broker-wide floor) before the
//     producer hears of it — this broker's coordinator directly, a peer's
//     through its fence file; otherwise INVALID_PRODUCER_EPOCH;
//   - its coordinator epoch must be at most the highest ownership epoch of
//     this broker's transaction slots (the epoch markers carry, R-MRK-3);
//     otherwise INVALID_REQUEST.
//
// Apache checks neither (it trusts the CLUSTER_ACTION principal), and
// neither does kaas for a peer broker of its cluster (broker/auth/peer.go).
// A transaction version 2 EndTxn hands out the next epoch without a fence
// (its markers fence the transaction's partitions, R-TV2-2): a non-peer
// sender's marker at that epoch is refused here. The coordinators that
// send it — this broker's, directly, and peers — are not checked.
func (b *Broker) markerBeyondIssued(c *server.Call, m kmsg.WriteTxnMarkersRequestMarker) int16 {
	if b.sec.IsPeer(c) {
		// A peer coordinator: trusted as Apache trusts CLUSTER_ACTION.
		// Its bump may not have reached this broker's floors yet (the
		// fence file is polled), and refusing the marker would leave the
		// transaction open here for good.
		return 0
	}
	floor, _ := b.floors.Get(m.ProducerID)
	if m.ProducerEpoch > max(floor, 0) {
		b.log.Warn("WriteTxnMarkers: marker epoch beyond any issued to the producer", "remote", c.Remote,
			"producer_id", m.ProducerID, "epoch", m.ProducerEpoch, "highest_issued", max(floor, 0))
		return kerr.InvalidProducerEpoch.Code
	}
	ceiling := int32(-1)
	if co := b.coordinating(); co != nil {
		ceiling = co.store.MaxCoordinatorEpoch()
	}
	if m.CoordinatorEpoch > ceiling {
		b.log.Warn("WriteTxnMarkers: coordinator epoch beyond any coordinator's", "remote", c.Remote,
			"producer_id", m.ProducerID, "coordinator_epoch", m.CoordinatorEpoch, "highest", ceiling)
		return kerr.InvalidRequest.Code
	}
	return 0
}
