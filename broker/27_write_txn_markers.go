package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/peers"
	"kaas/messages"
	"kaas/net/server"
)

func init() {
	register(api{key: 27, min: 0, max: 1, serve: serveWriteTxnMarkers, fail: failWriteTxnMarkers})
}

// serveWriteTxnMarkers serves WriteTxnMarkers (key 27), versions 0–1
// (R-MRK-4).
//
// Appends each marker to the partitions it names on this broker, as a
// coordinator write with acks=all, and answers once durable: a partition
// not hosted here → UNKNOWN_TOPIC_OR_PARTITION; a marker epoch below the
// producer's → INVALID_PRODUCER_EPOCH; a coordinator epoch below the one
// recorded for the producer → TRANSACTION_COORDINATOR_FENCED. Results are
// grouped by producer id (markers of the same producer merge). Who may
// send it, and the epochs a marker may carry, are checked in
// txn_markers_guard.go: with --authorizer, ALTER or CLUSTER_ACTION on the
// cluster; without one, only brokers (CLUSTER_AUTHORIZATION_FAILED
// everywhere otherwise). A marker entry tagged as an end fence (R-TV2-7,
// from a peer coordinator only) writes nothing: see serveEndFence.
func serveWriteTxnMarkers(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.WriteTxnMarkersRequest)
	if !b.markersAuthorized(c) {
		return failWriteTxnMarkers(req, kerr.ClusterAuthorizationFailed.Code)
	}
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	byPID := map[int64]int{}
	g := newGather(func() { c.Reply(resp) })
	type slot struct{ marker, topic int }
	var slots []slot
	for _, m := range req.Markers {
		i, ok := byPID[m.ProducerID]
		if !ok {
			i = len(resp.Markers)
			byPID[m.ProducerID] = i
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			resp.Markers = append(resp.Markers, rm)
		}
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			resp.Markers[i].Topics = append(resp.Markers[i].Topics, rt)
			slots = append(slots, slot{i, len(resp.Markers[i].Topics) - 1})
		}
	}
	for i := range req.Markers {
		b.serveEndFence(c, &req.Markers[i], &resp.Markers[byPID[req.Markers[i].ProducerID]])
	}
	// Slots are fixed now; fill them as the partitions answer.
	n := 0
	for _, m := range req.Markers {
		for _, t := range m.Topics {
			s := slots[n]
			n++
			parts := resp.Markers[s.marker].Topics[s.topic].Partitions
			for j, p := range t.Partitions {
				out := &parts[j]
				*out = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				out.Partition = p
				offsets := t.Topic == consumerOffsetsTopic // a group-offsets slot (txn_offsets_complete.go)
				h, code := b.leadPartition(t.Topic, p)
				if h == nil && !offsets {
					out.ErrorCode = code
					continue
				}
				if code := b.markerBeyondIssued(c, m); code != 0 {
					out.ErrorCode = code
					continue
				}
				g.add()
				if offsets {
					b.writeOffsetsMarker(p, m.ProducerID, m.ProducerEpoch, m.Committed, func(code int16) {
						out.ErrorCode = code
						g.done()
					})
					continue
				}
				h.Send(&messages.WriteMarker{
					ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed,
					CoordinatorEpoch: m.CoordinatorEpoch,
					Reply: func(code int16) {
						out.ErrorCode = code
						g.done()
					},
				})
			}
		}
	}
	g.done()
	return nil
}

func failWriteTxnMarkers(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// serveEndFence serves a marker entry tagged as an end fence (R-TV2-7;
// peers.EndFenceTag): a peer coordinator is about to answer a TV2 EndTxn
// before its markers reach this broker, so new data of the producer below
// the entry's epoch is refused here from now on (the broker-wide end
// floor: every partition at once), and each partition the tag names is
// answered NONE if this broker leads it (else its error: the coordinator
// then answers after the markers). Nothing is written; the entry names no
// partition of its own, so the marker loop skips it. Only a peer broker
// may send one (CLUSTER_AUTHORIZATION_FAILED otherwise).
func (b *Broker) serveEndFence(c *server.Call, m *kmsg.WriteTxnMarkersRequestMarker, rm *kmsg.WriteTxnMarkersResponseMarker) {
	tps, ok, err := peers.EndFencePartitions(m)
	if !ok {
		return
	}
	code := int16(0)
	switch {
	case err != nil:
		b.log.Warn("WriteTxnMarkers: undecodable end fence", "remote", c.Remote, "producer_id", m.ProducerID, "err", err)
		code = kerr.InvalidRequest.Code
	case !b.sec.IsPeer(c):
		b.log.Warn("WriteTxnMarkers: end fence from a client refused; only peer brokers send it", "remote", c.Remote,
			"producer_id", m.ProducerID)
		code = kerr.ClusterAuthorizationFailed.Code
	default:
		b.floors.RaiseEnd(m.ProducerID, m.ProducerEpoch)
	}
	for _, tp := range tps {
		pc := code
		if pc == 0 {
			_, pc = b.leadPartition(tp.Topic, tp.Partition)
		}
		i := -1
		for j := range rm.Topics {
			if rm.Topics[j].Topic == tp.Topic {
				i = j
			}
		}
		if i < 0 {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = tp.Topic
			rm.Topics = append(rm.Topics, rt)
			i = len(rm.Topics) - 1
		}
		rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
		rp.Partition, rp.ErrorCode = tp.Partition, pc
		rm.Topics[i].Partitions = append(rm.Topics[i].Partitions, rp)
	}
}
