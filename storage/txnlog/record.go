package txnlog

import (
	"encoding/json"
	"fmt"

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

func encodeRecord(r record) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("encoding a transaction record: %v", err)) // plain structs: cannot fail
	}
	return b
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
