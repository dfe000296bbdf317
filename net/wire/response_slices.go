package wire

import (
	"encoding/binary"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EncodeResponseSlices is EncodeResponse as slices to write one after the
// other (more than writev takes at once: the connection splits them). A Fetch answer's larger record sets are referenced, not copied:
// they were just read from the segment files into buffers of their own,
// and copying megabytes of them into one frame buffer was the largest
// cost of serving a fetch. Everything else is one slice, as
// EncodeResponse gives it.
func EncodeResponseSlices(correlationID int32, resp kmsg.Response) [][]byte {
	if f, ok := resp.(*kmsg.FetchResponse); ok && sliceable(f) {
		return fetchSlices(correlationID, f)
	}
	if f, ok := resp.(*kmsg.ShareFetchResponse); ok && shareSliceable(f) {
		return shareFetchSlices(correlationID, f)
	}
	return [][]byte{EncodeResponse(correlationID, resp)}
}

const (
	// minSliced is the smallest record set worth a slice of its own
	// (copying less is cheaper than another iovec).
	minSliced = 16 << 10
	// maxSliced bounds the slices one answer references: enough for a
	// consumer of a thousand partitions to have every record set
	// referenced (the connection writes at most IOV_MAX slices per
	// writev, net/server's iovMax). With 256, three quarters of such an
	// answer were copied into the frame, then again into gnet's outbound
	// buffer for what the socket did not take at once.
	maxSliced = 1024
)

// sliceable reports whether f is a Fetch answer this encoder covers (the
// fields kaas sets; anything else goes through kmsg) and carries enough
// record bytes to be worth it.
func sliceable(f *kmsg.FetchResponse) bool {
	if f.Version < 4 || f.Version > 16 || len(f.Brokers) > 0 || f.UnknownTags.Len() > 0 {
		return false
	}
	big := 0
	for i := range f.Topics {
		t := &f.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return false
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.UnknownTags.Len() > 0 || p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1 || p.DivergingEpoch.UnknownTags.Len() > 0 ||
				p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || p.CurrentLeader.UnknownTags.Len() > 0 ||
				p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1 || p.SnapshotID.UnknownTags.Len() > 0 {
				return false
			}
			for k := range p.AbortedTransactions {
				if p.AbortedTransactions[k].UnknownTags.Len() > 0 {
					return false
				}
			}
			if len(p.RecordBatches) >= minSliced {
				big++
			}
		}
	}
	return big > 0
}

// slicer builds an answer as a list of slices: bytes it encodes go into
// buf, and a record set it references closes the slice of buf before it.
type slicer struct {
	out   [][]byte
	buf   []byte
	start int // where in buf the slice being built starts
	left  int // references still allowed
	min   int // smallest record set referenced
}

func (s *slicer) reference(b []byte) {
	if len(b) < s.min || s.left == 0 {
		s.buf = append(s.buf, b...)
		return
	}
	s.left--
	if len(s.buf) > s.start {
		s.out = append(s.out, s.buf[s.start:])
	}
	s.out = append(s.out, b)
	s.start = len(s.buf)
}

// fetchSlices encodes f exactly as kmsg's FetchResponse.AppendTo does
// for the fields sliceable allows, behind the response header.
func fetchSlices(correlationID int32, f *kmsg.FetchResponse) [][]byte {
	v := f.Version
	flex := v >= 12
	heads := 64
	var big []int // sizes of the record sets worth referencing
	for i := range f.Topics {
		heads += 32 + len(f.Topics[i].Topic)
		for j := range f.Topics[i].Partitions {
			p := &f.Topics[i].Partitions[j]
			heads += 64 + 16*len(p.AbortedTransactions)
			if n := len(p.RecordBatches); n >= minSliced {
				big = append(big, n)
			}
		}
	}
	// Past maxSliced of them, only the largest are referenced (the first
	// maxSliced of those, if many are the same size).
	s := &slicer{left: maxSliced, min: minSliced}
	if len(big) > maxSliced {
		slices.Sort(big)
		s.min = big[len(big)-maxSliced]
	}
	// The buffer holds everything not referenced: sized exactly, by the
	// same choice reference makes, it never grows.
	inline, left := 0, maxSliced
	for i := range f.Topics {
		for j := range f.Topics[i].Partitions {
			if n := len(f.Topics[i].Partitions[j].RecordBatches); n >= s.min && left > 0 {
				left--
			} else {
				inline += n
			}
		}
	}
	s.buf = make([]byte, 0, heads+inline)
	b := s.buf
	b = append(b, 0, 0, 0, 0) // size, set last
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	if flex {
		b = append(b, 0) // response header tags
	}
	b = binary.BigEndian.AppendUint32(b, uint32(f.ThrottleMillis))
	if v >= 7 {
		b = binary.BigEndian.AppendUint16(b, uint16(f.ErrorCode))
		b = binary.BigEndian.AppendUint32(b, uint32(f.SessionID))
	}
	b = appendArrayLen(b, len(f.Topics), flex)
	for i := range f.Topics {
		t := &f.Topics[i]
		if v <= 12 {
			if flex {
				b = kbin.AppendCompactString(b, t.Topic)
			} else {
				b = kbin.AppendString(b, t.Topic)
			}
		} else {
			b = append(b, t.TopicID[:]...)
		}
		b = appendArrayLen(b, len(t.Partitions), flex)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
			b = binary.BigEndian.AppendUint16(b, uint16(p.ErrorCode))
			b = binary.BigEndian.AppendUint64(b, uint64(p.HighWatermark))
			b = binary.BigEndian.AppendUint64(b, uint64(p.LastStableOffset))
			if v >= 5 {
				b = binary.BigEndian.AppendUint64(b, uint64(p.LogStartOffset))
			}
			at := p.AbortedTransactions
			b = appendNullableLen(b, len(at), at == nil, flex)
			for k := range at {
				b = binary.BigEndian.AppendUint64(b, uint64(at[k].ProducerID))
				b = binary.BigEndian.AppendUint64(b, uint64(at[k].FirstOffset))
				if flex {
					b = append(b, 0)
				}
			}
			if v >= 11 {
				b = binary.BigEndian.AppendUint32(b, uint32(p.PreferredReadReplica))
			}
			rb := p.RecordBatches
			b = appendNullableLen(b, len(rb), rb == nil, flex)
			s.buf = b
			s.reference(rb)
			b = s.buf
			if flex {
				b = append(b, 0) // partition tags
			}
		}
		if flex {
			b = append(b, 0) // topic tags
		}
	}
	if flex {
		b = append(b, 0) // response tags
	}
	s.buf = b
	if len(s.buf) > s.start {
		s.out = append(s.out, s.buf[s.start:])
	}
	size := -4
	for _, x := range s.out {
		size += len(x)
	}
	// out[0] begins at the frame's first byte in whichever array held it
	// when it was cut.
	binary.BigEndian.PutUint32(s.out[0], uint32(size))
	return s.out
}

// appendNullableLen is appendArrayLen for a nullable array or bytes
// field: null is 0 in a compact length, -1 in a classic one.
func appendNullableLen(b []byte, n int, null, flex bool) []byte {
	switch {
	case null && flex:
		return kbin.AppendUvarint(b, 0)
	case null:
		return binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	return appendArrayLen(b, n, flex)
}

func appendArrayLen(b []byte, n int, flex bool) []byte {
	if flex {
		return kbin.AppendUvarint(b, uint32(n+1))
	}
	return binary.BigEndian.AppendUint32(b, uint32(n))
}
