// Package consumergroup is the classic consumer-group protocol as Apache
// Kafka 3.7 runs it (GroupCoordinator.scala, GroupMetadata.scala, MemberMetadata.scala
// and the delayed join/sync/heartbeat operations): membership, rebalances,
// static members, and the group's committed and transactional offsets.
//
// A Group is a plain state machine with no goroutines or locks: the group
// actor owns one and feeds it requests, timer firings and persistence
// results, all from its mailbox. Time, timers and the durable log are
// reached through Env, so the rules are unit-tested with a fake clock.
package consumergroup

// State is a group's state (Apache's GroupState). Its String form is what
// ListGroups and DescribeGroups report.
type State int8

const (
	// Empty: no members; offsets may linger until they expire.
	Empty State = iota
	// PreparingRebalance: waiting for members to (re)join.
	PreparingRebalance
	// CompletingRebalance: waiting for the leader's assignment.
	CompletingRebalance
	// Stable: every member has its assignment.
	Stable
	// Dead: the group is being removed.
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// States lists every state, for metrics.
var States = []State{Empty, PreparingRebalance, CompletingRebalance, Stable, Dead}

// validPrevious is Apache's validPreviousStates: a transition to the key
// is legal only from one of its values.
var validPrevious = map[State][]State{
	PreparingRebalance:  {Stable, CompletingRebalance, Empty},
	CompletingRebalance: {PreparingRebalance},
	Stable:              {CompletingRebalance},
	Dead:                {Stable, PreparingRebalance, CompletingRebalance, Empty, Dead},
	Empty:               {PreparingRebalance},
}

// CanTransition reports whether from → to is a legal transition.
func CanTransition(from, to State) bool {
	for _, s := range validPrevious[to] {
		if s == from {
			return true
		}
	}
	return false
}
