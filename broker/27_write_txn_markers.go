package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
// everywhere otherwise).
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
