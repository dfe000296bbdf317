package peers

import "sync"

// perBroker gathers items bound for peer brokers into one request per
// broker at a time, as Apache's TransactionMarkerChannelManager and
// AddPartitionsToTxnManager do: while a request to a broker is in flight,
// new items for it wait, and everything that waited goes in the next
// request. send runs on a goroutine of the broker's own and returns the
// items it could not put in this request (they go first in the next).
type perBroker[T any] struct {
	send func(broker int32, batch []T) (later []T)

	mu     sync.Mutex
	queues map[int32]*brokerQueue[T]
}

type brokerQueue[T any] struct {
	busy    bool
	pending []T
}

func newPerBroker[T any](send func(int32, []T) []T) *perBroker[T] {
	return &perBroker[T]{send: send, queues: map[int32]*brokerQueue[T]{}}
}

// add queues item for broker and starts a sender if none runs.
func (pb *perBroker[T]) add(broker int32, item T) {
	pb.mu.Lock()
	q := pb.queues[broker]
	if q == nil {
		q = &brokerQueue[T]{}
		pb.queues[broker] = q
	}
	q.pending = append(q.pending, item)
	if q.busy {
		pb.mu.Unlock()
		return
	}
	q.busy = true
	pb.mu.Unlock()
	go pb.drain(broker, q)
}

// drain sends what the queue holds, one request at a time, until it is
// empty.
func (pb *perBroker[T]) drain(broker int32, q *brokerQueue[T]) {
	for {
		pb.mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			q.busy = false
			pb.mu.Unlock()
			return
		}
		pb.mu.Unlock()
		if later := pb.send(broker, batch); len(later) > 0 {
			pb.mu.Lock()
			q.pending = append(later, q.pending...)
			pb.mu.Unlock()
		}
	}
}
