package partlog

import (
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MarkerBatchSize is the exact size of a transaction marker batch (R-MRK-3).
const MarkerBatchSize = 78

// BuildMarker encodes a COMMIT or ABORT control batch (spec R-MRK-3): one
// control record, key = version 0 + type, value = version 0 + coordinator
// epoch, base sequence -1, transactional + control attributes.
func BuildMarker(pid int64, epoch int16, commit bool, coordinatorEpoch int32, timestamp int64) []byte {
	typ := kmsg.ControlRecordKeyTypeAbort
	if commit {
		typ = kmsg.ControlRecordKeyTypeCommit
	}
	key := (&kmsg.ControlRecordKey{Version: 0, Type: typ}).AppendTo(nil)
	value := (&kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: coordinatorEpoch}).AppendTo(nil)
	rec := kmsg.Record{Key: key, Value: value}
	// Length counts the record after its own varint; encode once to size it.
	rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
	records := rec.AppendTo(nil)

	batch := kmsg.RecordBatch{
		Magic:           2,
		Attributes:      AttrTransactional | AttrControl,
		LastOffsetDelta: 0,
		FirstTimestamp:  timestamp,
		MaxTimestamp:    timestamp,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		FirstSequence:   -1,
		NumRecords:      1,
		Records:         records,
	}
	batch.Length = int32(BatchHeaderSize - logOverhead + len(records))
	out := batch.AppendTo(nil)
	setBatchCRC(out)
	return out
}

// ErrNotControl is returned when a batch is not a well-formed control batch.
var ErrNotControl = errors.New("not a transaction control batch")

// ParseMarker reads a control batch's marker type and coordinator epoch.
// Key or value versions above 0 are read by their v0 prefix (R-MRK-3).
func ParseMarker(batch []byte) (commit bool, coordinatorEpoch int32, err error) {
	h, err := ParseBatchHeader(batch)
	if err != nil || !h.IsControl() || len(batch) <= BatchHeaderSize {
		return false, 0, ErrNotControl
	}
	b := batch[BatchHeaderSize:]
	next := func(n int) []byte {
		if n < 0 || n > len(b) {
			return nil
		}
		out := b[:n]
		b = b[n:]
		return out
	}
	varint := func() int32 {
		v, n := kbin.Varint(b)
		if n == 0 {
			b = nil
			return -1
		}
		b = b[n:]
		return v
	}
	varint()                            // record length
	next(1)                             // attributes
	if _, n := kbin.Varlong(b); n > 0 { // timestamp delta
		b = b[n:]
	}
	varint() // offset delta
	key := next(int(varint()))
	value := next(int(varint()))
	if len(key) < 4 {
		return false, 0, ErrNotControl
	}
	typ := int16(binary.BigEndian.Uint16(key[2:]))
	if len(value) >= 6 {
		coordinatorEpoch = int32(binary.BigEndian.Uint32(value[2:]))
	}
	return typ == int16(kmsg.ControlRecordKeyTypeCommit), coordinatorEpoch, nil
}
