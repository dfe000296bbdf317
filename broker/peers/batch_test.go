package peers

import (
	"sync"
	"testing"
)

// While a request to a broker is in flight, what comes for it waits and
// goes in the next request, all of it; what send hands back goes first.
func TestPerBrokerBatches(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var requests [][]int
	started, done := make(chan struct{}), make(chan struct{})
	pb := newPerBroker(func(broker int32, batch []int) []int {
		mu.Lock()
		requests = append(requests, append([]int(nil), batch...))
		n := len(requests)
		mu.Unlock()
		switch n {
		case 1:
			close(started)
			<-release // the first request is in flight while 2, 3, 4 come
			return nil
		case 2:
			return batch[len(batch)-1:] // the last item does not fit
		case 3:
			close(done)
		}
		return nil
	})
	pb.add(7, 1)
	<-started
	pb.add(7, 2)
	pb.add(7, 3)
	pb.add(7, 4)
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	want := [][]int{{1}, {2, 3, 4}, {4}}
	if len(requests) != len(want) {
		t.Fatalf("requests %v, want %v", requests, want)
	}
	for i := range want {
		if len(requests[i]) != len(want[i]) {
			t.Fatalf("requests %v, want %v", requests, want)
		}
		for j := range want[i] {
			if requests[i][j] != want[i][j] {
				t.Fatalf("requests %v, want %v", requests, want)
			}
		}
	}
}
