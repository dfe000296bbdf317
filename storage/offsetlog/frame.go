// Package offsetlog is the durable store behind consumer groups: one
// append-only log per coordinator slot under <data>/__cluster/offsets/,
// holding what Apache keeps in a __consumer_offsets partition — offset
// commits, group metadata, transactional (pending) offsets and their
// commit/abort markers. Keys and values are Apache's own record formats
// (kmsg.OffsetCommitKey/Value, kmsg.GroupMetadataKey/Value), one entry per
// storage/slotlog record (CRC-framed; slotlog decides torn tail versus
// corruption). A log is compacted by rewriting it as a snapshot of its live
// state once it has grown well past that state's size.
package offsetlog

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kind says what a frame holds.
type Kind uint8

const (
	// KindPlain holds offset commits, group metadata and tombstones.
	KindPlain Kind = 0
	// KindTxn holds offset commits staged by a transactional producer,
	// invisible until a KindCommit frame for the producer (R-TXN-13).
	KindTxn Kind = 1
	// KindCommit materialises the producer's staged offsets (R-MRK-5).
	KindCommit Kind = 2
	// KindAbort discards the producer's staged offsets.
	KindAbort Kind = 3
	// KindProducerEpoch records the last epoch seen for a producer id, so
	// a snapshot keeps R-TXN-13's epoch check after compaction.
	KindProducerEpoch Kind = 4
	// KindSeqMark carries the next sequence number through a snapshot.
	KindSeqMark Kind = 5
)

func (k Kind) String() string {
	switch k {
	case KindPlain:
		return "plain"
	case KindTxn:
		return "txn"
	case KindCommit:
		return "commit"
	case KindAbort:
		return "abort"
	case KindProducerEpoch:
		return "producer-epoch"
	case KindSeqMark:
		return "seq-mark"
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Record is one key and value; a nil Value is a tombstone.
type Record struct {
	Key   []byte
	Value []byte
}

// Entry is one frame: appended atomically (a torn frame is dropped whole,
// like a Kafka record batch).
type Entry struct {
	Kind       Kind
	ProducerID int64 // KindTxn, KindCommit, KindAbort, KindProducerEpoch
	Epoch      int16
	Records    []Record
}

// seqs is how many sequence numbers an entry consumes: one per record,
// and one for a frame without records, so every frame orders after the
// ones before it.
func (e *Entry) seqs() uint64 {
	if len(e.Records) == 0 {
		return 1
	}
	return uint64(len(e.Records))
}

const (
	entryVersion  = 1
	bodyHeaderLen = 1 + 1 + 8 + 2 + 8 + 4 // version kind pid epoch firstSeq count
)

// encodeEntry encodes e with its records numbered from firstSeq.
func encodeEntry(dst []byte, e *Entry, firstSeq uint64) []byte {
	dst = append(dst, entryVersion, byte(e.Kind))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(e.Epoch))
	dst = binary.BigEndian.AppendUint64(dst, firstSeq)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Records)))
	for _, r := range e.Records {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Key)))
		dst = append(dst, r.Key...)
		if r.Value == nil {
			dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
			continue
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Value)))
		dst = append(dst, r.Value...)
	}
	return dst
}

// errMalformed marks an entry whose bytes passed the frame's CRC but do
// not decode.
var errMalformed = errors.New("malformed offsets entry")

// decodeEntry decodes one entry, returning it and its first sequence
// number. Record slices alias body.
func decodeEntry(body []byte) (e Entry, firstSeq uint64, err error) {
	if len(body) < bodyHeaderLen {
		return e, 0, errMalformed
	}
	if body[0] != entryVersion {
		return e, 0, fmt.Errorf("entry version %d: %w", body[0], errMalformed)
	}
	e.Kind = Kind(body[1])
	e.ProducerID = int64(binary.BigEndian.Uint64(body[2:]))
	e.Epoch = int16(binary.BigEndian.Uint16(body[10:]))
	firstSeq = binary.BigEndian.Uint64(body[12:])
	count := binary.BigEndian.Uint32(body[20:])
	rest := body[bodyHeaderLen:]
	if uint64(count) > uint64(len(rest))/8 {
		return e, 0, errMalformed
	}
	e.Records = make([]Record, 0, count)
	for i := uint32(0); i < count; i++ {
		if len(rest) < 4 {
			return e, 0, errMalformed
		}
		kl := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(kl) > uint64(len(rest)) {
			return e, 0, errMalformed
		}
		key := rest[:kl:kl]
		rest = rest[kl:]
		if len(rest) < 4 {
			return e, 0, errMalformed
		}
		vl := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		var val []byte
		if vl != 0xFFFFFFFF {
			if uint64(vl) > uint64(len(rest)) {
				return e, 0, errMalformed
			}
			val = rest[:vl:vl]
			rest = rest[vl:]
		}
		e.Records = append(e.Records, Record{Key: key, Value: val})
	}
	if len(rest) != 0 {
		return e, 0, errMalformed
	}
	return e, firstSeq, nil
}
