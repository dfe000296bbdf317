package pids

import "testing"

// R-IPI-4 / S-18: ids are unique across restarts and brokers.
func TestIDsNeverReusedAcrossRestartsAndBrokers(t *testing.T) {
	dir := t.TempDir()
	seen := map[int64]bool{}
	take := func(a *Allocator, n int) {
		for i := 0; i < n; i++ {
			id, err := a.Next()
			if err != nil {
				t.Fatal(err)
			}
			if id < 0 || seen[id] {
				t.Fatalf("id %d reused or negative", id)
			}
			seen[id] = true
		}
	}
	for restart := 0; restart < 3; restart++ {
		for _, broker := range []int32{0, 1} {
			a, err := Open(dir, broker)
			if err != nil {
				t.Fatal(err)
			}
			take(a, 3+restart*BlockSize/2)
		}
	}
	a, _ := Open(dir, 0)
	id, _ := a.Next()
	if id>>40 != 1 {
		t.Fatalf("broker 0 id %d is not in its range", id)
	}
}
