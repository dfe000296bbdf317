package txnlog

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"kaas/model"
	"kaas/model/txnstate"
)

// TestEncodeRecordIsJSONMarshal holds the hand-written encoder to
// encoding/json's bytes for records of every shape, strings that need
// escaping included; and fails when record or txnstate.Entry gains a
// field it does not write (the fields count below).
func TestEncodeRecordIsJSONMarshal(t *testing.T) {
	if n := reflect.TypeFor[record]().NumField(); n != 4 {
		t.Fatalf("record has %d fields: teach encodeRecord the new one, then this count", n)
	}
	if n := reflect.TypeFor[txnstate.Entry]().NumField(); n != 13 {
		t.Fatalf("txnstate.Entry has %d fields: teach appendEntry the new one, then this count", n)
	}
	strs := []string{"", "t", "orders", "a\"b", `back\slash`, "<html>&", "tab\there", "nul\x00", "é ü", "\u2028\u2029", "bad\xffutf8", "\x7f"}
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string { return strs[rng.IntN(len(strs))] }
	num := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return -1
		case 2:
			return rng.Int64()
		}
		return rng.Int64N(100000)
	}
	for i := range 2000 {
		r := record{Op: []string{"put", "del", "epoch", str()}[rng.IntN(4)], ID: str(), CoordinatorEpoch: int32(num())}
		if i%5 != 0 {
			e := txnstate.Entry{
				TransactionalID: str(), ProducerID: num(), Epoch: int16(num()), LastProducerID: num(),
				LastEpoch: int16(num()), TimeoutMs: int32(num()), State: txnstate.State(rng.IntN(9) - 1),
				TxnStartMs: num(), LastUpdateMs: num(), TV: int8(num()), NextProducerID: num(),
			}
			switch rng.IntN(3) {
			case 0:
				e.Partitions = []model.TopicPartition{}
			case 1:
				for range rng.IntN(4) + 1 {
					e.Partitions = append(e.Partitions, model.TopicPartition{Topic: str(), Partition: int32(num())})
				}
			}
			switch rng.IntN(3) {
			case 0:
				e.Groups = []string{}
			case 1:
				for range rng.IntN(3) + 1 {
					e.Groups = append(e.Groups, str())
				}
			}
			r.Entry = &e
		}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeRecord(r); string(got) != string(want) {
			t.Fatalf("record %+v:\n got %s\nwant %s", r, got, want)
		}
	}
}

func BenchmarkEncodeRecord(b *testing.B) {
	e := txnstate.Entry{TransactionalID: "txn-commit-0", ProducerID: 1 << 40, Epoch: 7, LastProducerID: 1 << 40, LastEpoch: 6,
		TimeoutMs: 60000, State: txnstate.Ongoing, Partitions: []model.TopicPartition{{Topic: "bench", Partition: 3}},
		TxnStartMs: 1764780000000, LastUpdateMs: 1764780000001, TV: 2}
	for b.Loop() {
		encodeRecord(record{Op: "put", Entry: &e, CoordinatorEpoch: 1})
	}
}

func BenchmarkEncodeRecordJSON(b *testing.B) {
	e := txnstate.Entry{TransactionalID: "txn-commit-0", ProducerID: 1 << 40, Epoch: 7, LastProducerID: 1 << 40, LastEpoch: 6,
		TimeoutMs: 60000, State: txnstate.Ongoing, Partitions: []model.TopicPartition{{Topic: "bench", Partition: 3}},
		TxnStartMs: 1764780000000, LastUpdateMs: 1764780000001, TV: 2}
	for b.Loop() {
		json.Marshal(record{Op: "put", Entry: &e, CoordinatorEpoch: 1})
	}
}
