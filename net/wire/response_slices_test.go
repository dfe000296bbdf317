package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// randomFetchResponse is a Fetch answer at version v with the fields kaas
// sets: errors, offsets, aborted transactions (nil or not), session ids,
// record sets from none to a few hundred KiB.
func randomFetchResponse(r *rand.Rand, v int16) *kmsg.FetchResponse {
	f := kmsg.NewPtrFetchResponse()
	f.SetVersion(v)
	f.ThrottleMillis, f.ErrorCode, f.SessionID = r.Int32(), int16(r.IntN(3)), r.Int32()
	for range r.IntN(4) {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = string(bytes.Repeat([]byte{'t'}, r.IntN(300)))
		for i := range t.TopicID {
			t.TopicID[i] = byte(r.Uint32())
		}
		for range r.IntN(400) {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = r.Int32(), int16(r.IntN(2))
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = r.Int64(), r.Int64(), r.Int64()
			p.PreferredReadReplica = r.Int32N(3) - 1
			switch r.IntN(3) {
			case 0:
				p.AbortedTransactions = nil
			case 1:
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			default:
				for range 1 + r.IntN(3) {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = r.Int64(), r.Int64()
					p.AbortedTransactions = append(p.AbortedTransactions, a)
				}
			}
			switch r.IntN(5) {
			case 0:
				p.RecordBatches = nil
			case 1:
				p.RecordBatches = []byte{}
			case 2:
				p.RecordBatches = bytes.Repeat([]byte{byte(r.Int())}, 1+r.IntN(minSliced))
			default:
				p.RecordBatches = bytes.Repeat([]byte{byte(r.Int())}, minSliced+r.IntN(16<<10))
			}
			t.Partitions = append(t.Partitions, p)
		}
		f.Topics = append(f.Topics, t)
	}
	return f
}

// TestResponseSlicesMatchKmsg: for every Fetch version, the slices joined
// are byte for byte kmsg's encoding, and the larger record sets are
// referenced (never more than maxSliced), not copied.
func TestResponseSlicesMatchKmsg(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for v := int16(4); v <= 16; v++ {
		for range 3 {
			f := randomFetchResponse(r, v)
			want := EncodeResponse(7, f)
			got := EncodeResponseSlices(7, f)
			if joined := bytes.Join(got, nil); !bytes.Equal(joined, want) {
				t.Fatalf("v%d: %d bytes in %d slices, kmsg encodes %d bytes; first difference at %d", v, len(joined), len(got), len(want), firstDiff(joined, want))
			}
			if len(got) > 2*maxSliced+1 {
				t.Fatalf("v%d: %d slices", v, len(got))
			}
			referenced := 0
			for _, s := range got {
				for _, tp := range f.Topics {
					for _, p := range tp.Partitions {
						if len(s) > 0 && len(p.RecordBatches) > 0 && &s[0] == &p.RecordBatches[0] {
							referenced++
						}
					}
				}
			}
			if sliceable(f) && referenced == 0 {
				t.Fatalf("v%d: no record set referenced", v)
			}
		}
	}
}

// TestResponseSlicesOtherAnswers: anything else, or a Fetch answer with
// fields kaas does not set, is kmsg's encoding in one slice.
func TestResponseSlicesOtherAnswers(t *testing.T) {
	p := kmsg.NewPtrProduceResponse()
	p.SetVersion(9)
	if got := EncodeResponseSlices(3, p); len(got) != 1 || !bytes.Equal(got[0], EncodeResponse(3, p)) {
		t.Fatal("a Produce answer is not one slice of kmsg's encoding")
	}
	f := randomFetchResponse(rand.New(rand.NewPCG(3, 4)), 16)
	b := kmsg.NewFetchResponseBroker()
	f.Brokers = append(f.Brokers, b)
	if got := EncodeResponseSlices(3, f); len(got) != 1 || !bytes.Equal(got[0], EncodeResponse(3, f)) {
		t.Fatal("a Fetch answer with node endpoints is not one slice of kmsg's encoding")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestResponseSlicesSizedOnce: with more record sets worth referencing
// than maxSliced, all of one size (a consumer caught up evenly on many
// partitions), the part copied is sized up front: one buffer, never grown.
func TestResponseSlicesSizedOnce(t *testing.T) {
	f := kmsg.NewPtrFetchResponse()
	f.SetVersion(16)
	tp := kmsg.NewFetchResponseTopic()
	for i := range 2 * maxSliced {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.RecordBatches = int32(i), make([]byte, minSliced)
		tp.Partitions = append(tp.Partitions, p)
	}
	f.Topics = append(f.Topics, tp)
	out := fetchSlices(1, f)
	copied := 0
	for _, s := range out {
		if len(s) != minSliced {
			copied += len(s)
		}
	}
	if cap(out[0]) < copied {
		t.Fatalf("first slice's buffer holds %d bytes, %d were copied: it grew", cap(out[0]), copied)
	}
}

// TestShareFetchSlicesMatchKmsg: a ShareFetch answer's slices joined are
// byte for byte kmsg's encoding, for every version, and its larger
// record sets are referenced, not copied.
func TestShareFetchSlicesMatchKmsg(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	str := func() *string {
		if r.IntN(2) == 0 {
			return nil
		}
		s := string(bytes.Repeat([]byte{'e'}, r.IntN(40)))
		return &s
	}
	for v := int16(0); v <= 2; v++ {
		for range 5 {
			f := kmsg.NewPtrShareFetchResponse()
			f.SetVersion(v)
			f.ThrottleMillis, f.ErrorCode, f.ErrorMessage, f.AcquisitionLockTimeoutMillis = r.Int32(), int16(r.IntN(3)), str(), r.Int32()
			for range 1 + r.IntN(3) {
				tp := kmsg.NewShareFetchResponseTopic()
				for i := range tp.TopicID {
					tp.TopicID[i] = byte(r.Uint32())
				}
				for range 1 + r.IntN(20) {
					p := kmsg.NewShareFetchResponseTopicPartition()
					p.Partition, p.ErrorCode, p.ErrorMessage = r.Int32(), int16(r.IntN(2)), str()
					p.AcknowledgeErrorCode, p.AcknowledgeErrorMessage = int16(r.IntN(2)), str()
					p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = r.Int32(), r.Int32()
					switch r.IntN(4) {
					case 0:
						p.Records = nil
					case 1:
						p.Records = bytes.Repeat([]byte{byte(r.Int())}, 1+r.IntN(minSliced))
					default:
						p.Records = bytes.Repeat([]byte{byte(r.Int())}, minSliced+r.IntN(64<<10))
					}
					for range r.IntN(4) {
						a := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
						a.FirstOffset, a.LastOffset, a.DeliveryCount = r.Int64(), r.Int64(), int16(r.IntN(6))
						p.AcquiredRecords = append(p.AcquiredRecords, a)
					}
					tp.Partitions = append(tp.Partitions, p)
				}
				f.Topics = append(f.Topics, tp)
			}
			for range r.IntN(3) {
				n := kmsg.NewShareFetchResponseNodeEndpoint()
				n.NodeID, n.Host, n.Port, n.Rack = r.Int32(), "broker.example", r.Int32(), str()
				f.NodeEndpoints = append(f.NodeEndpoints, n)
			}
			want := EncodeResponse(9, f)
			got := EncodeResponseSlices(9, f)
			if joined := bytes.Join(got, nil); !bytes.Equal(joined, want) {
				t.Fatalf("v%d: %d bytes in %d slices, kmsg encodes %d bytes; first difference at %d", v, len(joined), len(got), len(want), firstDiff(joined, want))
			}
			if shareSliceable(f) && len(got) < 2 {
				t.Fatalf("v%d: no record set referenced", v)
			}
		}
	}
}
