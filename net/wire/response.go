package wire

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AppendResponse appends one whole response frame: size, correlation id, the
// response header's tagged fields when flexible (never for ApiVersions,
// KIP-511), and the body encoded by kmsg at the response's version.
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != ApiVersionsKey {
		dst = append(dst, 0) // empty tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// EncodeResponse is AppendResponse into a buffer sized up front, so a fetch
// answer carrying megabytes of record batches is copied once instead of
// through a chain of slice growths.
func EncodeResponse(correlationID int32, resp kmsg.Response) []byte {
	return AppendResponse(make([]byte, 0, sizeHint(resp)), correlationID, resp)
}

// sizeHint estimates an encoded response's size: exact enough for the
// record-carrying fetch answer, a small default for everything else.
func sizeHint(resp kmsg.Response) int {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 512
	}
	n := 64
	for _, t := range f.Topics {
		n += len(t.Topic) + 32
		for _, p := range t.Partitions {
			n += len(p.RecordBatches) + 64 + 16*len(p.AbortedTransactions)
		}
	}
	return n
}
