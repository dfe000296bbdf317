package txnlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"kaas/storage/slots"
)

func TestStoreSurvivesReopenAndTornTail(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := Entry{TransactionalID: "t", ProducerID: 7, Epoch: 3, LastProducerID: 7, LastEpoch: 2, State: Ongoing,
		Partitions: []TopicPartition{{"a", 0}}, TimeoutMs: 60000, TxnStartMs: 5}
	if err := st.Put(e); err != nil {
		t.Fatal(err)
	}
	epoch := st.CoordinatorEpoch("t")
	st.Close()

	// A crash mid-append leaves half a line.
	path := filepath.Join(dir, "__cluster", "txn_state", fmt.Sprintf("slot-%02d.log", slots.Of("t")))
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`1234abcd {"op":"put","entry":{"id":"t","pid":99`)
	f.Close()

	st, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, ok := st.Get("t")
	if !ok || got.ProducerID != 7 || got.Epoch != 3 || got.LastEpoch != 2 || got.State != Ongoing || !got.HasPartition(TopicPartition{"a", 0}) {
		t.Fatalf("after reopen: %+v %v", got, ok)
	}
	if st.CoordinatorEpoch("t") != epoch+1 {
		t.Fatalf("coordinator epoch %d, want %d (R-MRK-3: rises on every takeover)", st.CoordinatorEpoch("t"), epoch+1)
	}
	if err := st.Put(Entry{TransactionalID: "t", ProducerID: 7, Epoch: 4}); err != nil {
		t.Fatal("append after torn tail:", err)
	}
}

func TestStoreCompactsWithoutLosingEntries(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 800; i++ {
				if err := st.Put(Entry{TransactionalID: fmt.Sprintf("id-%d", w), Epoch: int16(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	st.Close()
	st, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for w := 0; w < 4; w++ {
		e, ok := st.Get(fmt.Sprintf("id-%d", w))
		if !ok || e.Epoch != 799 {
			t.Fatalf("id-%d: %+v %v", w, e, ok)
		}
	}
	for _, s := range st.slots {
		if s.records > 1100 {
			t.Fatalf("slot file holds %d records: never compacted", s.records)
		}
	}
}
