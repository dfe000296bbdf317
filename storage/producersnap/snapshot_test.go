package producersnap

import (
	"reflect"
	"testing"
)

// golden is a snapshot as the format's first version wrote it
// (state/producers.Snapshot before the format moved here): it must read
// the same for ever, and encode byte for byte the same.
const golden = `{"version":1,"offset":5,"producers":{"1":{"epoch":2,"window":[{"first_seq":0,"last_seq":2,"first_offset":0,"last_offset":2,"timestamp":7}],"coordinator_epoch":3,"last_timestamp":7,"txn_first_offset":0}}}`

func TestGolden(t *testing.T) {
	off, ps, err := Decode([]byte(golden))
	want := map[int64]Producer{1: {Epoch: 2, Window: []Batch{{FirstSeq: 0, LastSeq: 2, FirstOffset: 0, LastOffset: 2, Timestamp: 7}},
		CoordinatorEpoch: 3, LastTimestamp: 7, TxnFirstOffset: 0}}
	if err != nil || off != 5 || !reflect.DeepEqual(ps, want) {
		t.Fatalf("Decode = %d, %+v, %v", off, ps, err)
	}
	b, err := Encode(5, want)
	if err != nil || string(b) != golden {
		t.Fatalf("Encode = %s, %v", b, err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, bad := range []string{`{`, `{"version":2,"offset":1,"producers":{}}`, `{"version":1,"offset":1,"producers":{"x":{}}}`} {
		if _, _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s) accepted", bad)
		}
	}
}
