package wire

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A ShareFetch answer's record sets are referenced as a Fetch answer's
// are: a share fetch hands out whole batches (a producer's batch holds
// thousands of records, often most of a megabyte), and copying them into
// the frame was the largest cost the broker had left serving eight share
// consumers (kaas bench share-8).

// shareSliceable reports whether f is a ShareFetch answer this encoder
// covers (no unknown tags anywhere) with a record set worth referencing.
func shareSliceable(f *kmsg.ShareFetchResponse) bool {
	if f.Version < 0 || f.Version > 2 || f.UnknownTags.Len() > 0 {
		return false
	}
	for i := range f.NodeEndpoints {
		if f.NodeEndpoints[i].UnknownTags.Len() > 0 {
			return false
		}
	}
	big := 0
	for i := range f.Topics {
		t := &f.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return false
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.UnknownTags.Len() > 0 || p.CurrentLeader.UnknownTags.Len() > 0 {
				return false
			}
			for k := range p.AcquiredRecords {
				if p.AcquiredRecords[k].UnknownTags.Len() > 0 {
					return false
				}
			}
			if len(p.Records) >= minSliced {
				big++
			}
		}
	}
	return big > 0
}

// shareFetchSlices encodes f exactly as kmsg's ShareFetchResponse.AppendTo
// does (every version is flexible), behind the response header.
func shareFetchSlices(correlationID int32, f *kmsg.ShareFetchResponse) [][]byte {
	s := &slicer{left: maxSliced, min: minSliced}
	b := make([]byte, 0, 256)
	b = append(b, 0, 0, 0, 0) // size, set last
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	b = append(b, 0) // response header tags
	b = binary.BigEndian.AppendUint32(b, uint32(f.ThrottleMillis))
	b = binary.BigEndian.AppendUint16(b, uint16(f.ErrorCode))
	b = kbin.AppendCompactNullableString(b, f.ErrorMessage)
	if f.Version >= 1 {
		b = binary.BigEndian.AppendUint32(b, uint32(f.AcquisitionLockTimeoutMillis))
	}
	b = kbin.AppendCompactArrayLen(b, len(f.Topics))
	for i := range f.Topics {
		t := &f.Topics[i]
		b = append(b, t.TopicID[:]...)
		b = kbin.AppendCompactArrayLen(b, len(t.Partitions))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
			b = binary.BigEndian.AppendUint16(b, uint16(p.ErrorCode))
			b = kbin.AppendCompactNullableString(b, p.ErrorMessage)
			b = binary.BigEndian.AppendUint16(b, uint16(p.AcknowledgeErrorCode))
			b = kbin.AppendCompactNullableString(b, p.AcknowledgeErrorMessage)
			b = binary.BigEndian.AppendUint32(b, uint32(p.CurrentLeader.LeaderID))
			b = binary.BigEndian.AppendUint32(b, uint32(p.CurrentLeader.LeaderEpoch))
			b = append(b, 0) // leader tags
			b = appendNullableLen(b, len(p.Records), p.Records == nil, true)
			s.buf = b
			s.reference(p.Records)
			b = s.buf
			b = kbin.AppendCompactArrayLen(b, len(p.AcquiredRecords))
			for k := range p.AcquiredRecords {
				a := &p.AcquiredRecords[k]
				b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
				b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
				b = binary.BigEndian.AppendUint16(b, uint16(a.DeliveryCount))
				b = append(b, 0) // acquired records tags
			}
			b = append(b, 0) // partition tags
		}
		b = append(b, 0) // topic tags
	}
	b = kbin.AppendCompactArrayLen(b, len(f.NodeEndpoints))
	for i := range f.NodeEndpoints {
		n := &f.NodeEndpoints[i]
		b = binary.BigEndian.AppendUint32(b, uint32(n.NodeID))
		b = kbin.AppendCompactString(b, n.Host)
		b = binary.BigEndian.AppendUint32(b, uint32(n.Port))
		b = kbin.AppendCompactNullableString(b, n.Rack)
		b = append(b, 0) // endpoint tags
	}
	b = append(b, 0) // response tags
	s.buf = b
	if len(s.buf) > s.start {
		s.out = append(s.out, s.buf[s.start:])
	}
	size := -4
	for _, x := range s.out {
		size += len(x)
	}
	binary.BigEndian.PutUint32(s.out[0], uint32(size))
	return s.out
}
