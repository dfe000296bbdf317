package txnlog

import (
	"encoding/json"
	"fmt"
	"strconv"

	"kaas/model/txnstate"
)

// record is one slot-log record (storage/slotlog frames its JSON): an
// entry put, an entry deleted, or the slot's coordinator epoch taken at
// start-up. Every record carries the slot's coordinator epoch, so the
// epoch is never reused even if the record that raised it is lost to
// damage (R-MRK-3).
type record struct {
	Op               string          `json:"op"` // "put", "del", "epoch"
	Entry            *txnstate.Entry `json:"entry,omitempty"`
	ID               string          `json:"id,omitempty"`
	CoordinatorEpoch int32           `json:"coordinator_epoch"`
}

// encodeRecord is json.Marshal(r), byte for byte (record_test.go holds
// it to that), written out by hand: every transition of every
// transaction is encoded once, and encoding/json's reflection and
// buffers were ~4% of a transaction's broker CPU and a tenth of its
// allocations. A field added to record or txnstate.Entry must be added
// here too; the test fails until it is.
func encodeRecord(r record) []byte { return appendRecord(make([]byte, 0, sizeHint(r)), r) }

// appendRecord appends encodeRecord(r) to b.
func appendRecord(b []byte, r record) []byte {
	b = append(b, `{"op":`...)
	b = appendString(b, r.Op)
	if e := r.Entry; e != nil {
		b = append(b, `,"entry":`...)
		b = appendEntry(b, e)
	}
	if r.ID != "" {
		b = append(b, `,"id":`...)
		b = appendString(b, r.ID)
	}
	b = append(b, `,"coordinator_epoch":`...)
	b = strconv.AppendInt(b, int64(r.CoordinatorEpoch), 10)
	return append(b, '}')
}

// sizeHint is about the size of r's JSON, so the buffer is allocated once:
// ~230 bytes of names and numbers, plus its strings.
func sizeHint(r record) int {
	n := 64 + len(r.Op) + len(r.ID)
	if e := r.Entry; e != nil {
		n += 200 + len(e.TransactionalID)
		for _, tp := range e.Partitions {
			n += 24 + len(tp.Topic)
		}
		for _, g := range e.Groups {
			n += 3 + len(g)
		}
	}
	return n
}

// appendEntry is txnstate.Entry's JSON in its fields' order, omitempty
// fields left out when empty, as encoding/json writes it.
func appendEntry(b []byte, e *txnstate.Entry) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, e.TransactionalID)
	b = appendInt(b, `,"pid":`, e.ProducerID)
	b = appendInt(b, `,"epoch":`, int64(e.Epoch))
	b = appendInt(b, `,"last_pid":`, e.LastProducerID)
	b = appendInt(b, `,"last_epoch":`, int64(e.LastEpoch))
	b = appendInt(b, `,"timeout_ms":`, int64(e.TimeoutMs))
	b = appendInt(b, `,"state":`, int64(e.State))
	if len(e.Partitions) > 0 {
		b = append(b, `,"partitions":[`...)
		for i, tp := range e.Partitions {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"t":`...)
			b = appendString(b, tp.Topic)
			b = appendInt(b, `,"p":`, int64(tp.Partition))
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(e.Groups) > 0 {
		b = append(b, `,"groups":[`...)
		for i, g := range e.Groups {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, g)
		}
		b = append(b, ']')
	}
	b = appendInt(b, `,"txn_start_ms":`, e.TxnStartMs)
	b = appendInt(b, `,"last_update_ms":`, e.LastUpdateMs)
	if e.TV != 0 {
		b = appendInt(b, `,"tv":`, int64(e.TV))
	}
	if e.NextProducerID != 0 {
		b = appendInt(b, `,"next_pid":`, e.NextProducerID)
	}
	return append(b, '}')
}

func appendInt(b []byte, key string, v int64) []byte {
	return strconv.AppendInt(append(b, key...), v, 10)
}

// appendString writes s as a JSON string: directly when it is printable
// ASCII that encoding/json leaves alone (no quote, backslash, or the
// HTML characters it escapes), else through encoding/json, so any other
// string (control bytes, non-ASCII, invalid UTF-8) gets its exact
// escaping.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil {
				panic(fmt.Sprintf("encoding a transaction record's string: %v", err)) // a string: cannot fail
			}
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func decodeRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return r, err
	}
	switch r.Op {
	case "put":
		if r.Entry == nil || r.Entry.TransactionalID == "" {
			return r, fmt.Errorf("put record without an entry")
		}
	case "del":
		if r.ID == "" {
			return r, fmt.Errorf("del record without an id")
		}
	case "epoch":
	default:
		return r, fmt.Errorf("unknown record op %q", r.Op)
	}
	return r, nil
}
