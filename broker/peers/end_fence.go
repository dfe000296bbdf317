package peers

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model"
)

// EndFenceTag marks a WriteTxnMarkers marker entry as an end fence
// (R-TV2-7), not a marker: the receiving broker refuses new data batches
// of the producer below the entry's epoch on every partition the tag's
// value names that it leads, answers each of them at once and writes
// nothing. Kafka's protocol has no request for it; a tagged field of the
// broker-to-broker request that carries the marker after it keeps it on
// the path peers already authenticate (KAAS-PEER) and authorize
// (CLUSTER_ACTION). The entry itself names no partition, so a broker that
// does not know the tag (an older kaas, mid-upgrade) writes nothing and
// answers none, which the sender takes as "not fenced".
const EndFenceTag uint32 = 0x6b616173 // "kaas"

// EndFencePartitions returns the partitions an end fence entry names, and
// whether m is one (an undecodable value is an error).
func EndFencePartitions(m *kmsg.WriteTxnMarkersRequestMarker) ([]model.TopicPartition, bool, error) {
	var val []byte
	found := false
	m.UnknownTags.Each(func(key uint32, v []byte) {
		if key == EndFenceTag {
			val, found = v, true
		}
	})
	if !found {
		return nil, false, nil
	}
	tps, err := decodeEndFence(val)
	return tps, true, err
}

// encodeEndFence is the tag's value: per partition, the topic's length
// (uvarint), the topic and the partition (uvarint).
func encodeEndFence(tps []model.TopicPartition) []byte {
	var b []byte
	for _, tp := range tps {
		b = binary.AppendUvarint(b, uint64(len(tp.Topic)))
		b = append(b, tp.Topic...)
		b = binary.AppendUvarint(b, uint64(uint32(tp.Partition)))
	}
	return b
}

var errEndFenceValue = errors.New("undecodable end fence value")

func decodeEndFence(b []byte) ([]model.TopicPartition, error) {
	var out []model.TopicPartition
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, errEndFenceValue
		}
		topic := string(b[k : k+int(n)])
		b = b[k+int(n):]
		p, k := binary.Uvarint(b)
		if k <= 0 || p > 1<<31-1 {
			return nil, errEndFenceValue
		}
		b = b[k:]
		out = append(out, model.TopicPartition{Topic: topic, Partition: int32(p)})
	}
	return out, nil
}

// FenceEnd asks leader, a peer, to refuse new data of pid below epoch on
// tps (R-TV2-7), and calls done with nil once every partition of tps is
// answered NONE, else with why not (the caller then answers EndTxn after
// the markers, never earlier). One request per call, on a goroutine of
// its own: a round trip with no disk write behind it, which waiting
// behind another transaction's request would only lengthen.
func (p *Client) FenceEnd(leader int32, pid int64, epoch int16, tps []model.TopicPartition, done func(error)) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1 // flexible: tagged fields
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = pid, epoch, -1
	m.UnknownTags.Set(EndFenceTag, encodeEndFence(tps))
	req.Markers = append(req.Markers, m)
	p.endFences.Add(1)
	go func() {
		resp, err := p.Request(leader, req)
		if err != nil {
			done(err)
			return
		}
		done(endFenceOutcome(resp.(*kmsg.WriteTxnMarkersResponse), pid, tps, leader))
	}()
}

// endFenceOutcome is nil if every partition of tps was answered NONE.
func endFenceOutcome(resp *kmsg.WriteTxnMarkersResponse, pid int64, tps []model.TopicPartition, leader int32) error {
	for _, tp := range tps {
		code := markerCode(resp, pid, tp)
		if code != 0 {
			return fmt.Errorf("end fence on %s-%d at broker %d: %w", tp.Topic, tp.Partition, leader, kerr.ErrorForCode(code))
		}
	}
	return nil
}

// EndFences counts the end fences sent to peers, for /metrics.
func (p *Client) EndFences() int64 { return p.endFences.Load() }
