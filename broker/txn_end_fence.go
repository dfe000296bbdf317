package broker

import (
	"errors"
	"fmt"
	"sync"

	"kaas/model"
)

// endFencer fences the ended epoch of a TV2 transaction on its partitions
// before its EndTxn is answered (R-TV2-7, actors/txn.EndFencer): this
// broker's partitions through the broker-wide end floor (one map write
// fences them all), each peer leading some of them with one end fence
// request (peers.FenceEnd), all at once and concurrently with the
// Prepare* write. Any partition that cannot be fenced now — between
// owners, its leader unreachable — makes the whole fence fail, and the
// coordinator answers after the markers instead.
type endFencer struct{ b *Broker }

var errBetweenOwners = errors.New("a partition of the transaction is between owners")

func (f endFencer) FenceEnd(pid int64, epoch int16, tps []model.TopicPartition, done func(error)) {
	b := f.b
	b.floors.RaiseEnd(pid, epoch)
	byLeader := map[int32][]model.TopicPartition{}
	for _, tp := range tps {
		if b.partition(tp.Topic, tp.Partition) != nil || !b.partitionExists(tp.Topic, tp.Partition) {
			continue // led here (fenced above), or deleted (no marker either)
		}
		leader, _, ok := b.partitionOwner(tp.Topic, tp.Partition)
		if b.peers == nil || !ok || leader == b.cfg.BrokerID {
			done(fmt.Errorf("%w: %s-%d", errBetweenOwners, tp.Topic, tp.Partition))
			return
		}
		byLeader[leader] = append(byLeader[leader], tp)
	}
	if len(byLeader) == 0 {
		done(nil)
		return
	}
	var mu sync.Mutex
	left := len(byLeader)
	var first error
	for leader, parts := range byLeader {
		b.peers.FenceEnd(leader, pid, epoch, parts, func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			if left--; left == 0 {
				done(first)
			}
		})
	}
}

// DropEnd drops this broker's end floor once every marker it guarded is
// durable (peers keep theirs: a pid's floor is one small map entry,
// dropped with its fence or replaced by its next end).
func (f endFencer) DropEnd(pid int64, epoch int16) { f.b.floors.DropEnd(pid, epoch) }
