package coord

// Reassignments (issue 24): an operator's choice of the broker that should
// own a unit, made with AlterPartitionReassignments. It overrides the
// rendezvous choice for as long as it is stored (and that broker is
// alive); the ownership loops move the unit there by the usual graceful
// hand-off. Kept in etcd under reassignments/<unit>, with no lease: it
// outlives every broker, as Apache's replica assignment does.

import (
	"encoding/json"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"kaas/state/ownership"
)

// Reassignment is the broker an operator assigned a unit to.
type Reassignment struct {
	Broker int32 `json:"broker"`
}

func (k keys) reassignments() string           { return k.root + "reassignments/" }
func (k keys) reassignment(unit string) string { return k.reassignments() + unit }

// applyReassignment folds one reassignments/ key into the view; it
// reports whether key was one.
func (v *View) applyReassignment(k keys, key string, value []byte) bool {
	unit, ok := strings.CutPrefix(key, k.reassignments())
	if !ok {
		return false
	}
	if value == nil {
		delete(v.Reassignments, unit)
		return true
	}
	var r Reassignment
	if json.Unmarshal(value, &r) == nil {
		v.Reassignments[unit] = r
	}
	return true
}

// Reassign stores that unit should be owned by broker.
func (s *Session) Reassign(unit string, broker int32) error {
	b, err := json.Marshal(Reassignment{Broker: broker})
	if err != nil {
		return err
	}
	ctx, cancel := opContext()
	defer cancel()
	_, err = s.cl.Put(ctx, s.keys.reassignment(unit), string(b))
	return err
}

// CancelReassignment forgets the operator's choice for unit: rendezvous
// hashing decides again.
func (s *Session) CancelReassignment(unit string) error {
	ctx, cancel := opContext()
	defer cancel()
	_, err := s.cl.Delete(ctx, s.keys.reassignment(unit))
	return err
}

// reassignmentsOfTopic is the delete of every reassignment of a topic's
// partitions.
func (s *Session) reassignmentsOfTopic(name string) clientv3.Op {
	return clientv3.OpDelete(s.keys.reassignment(ownership.TopicUnitsPrefix(name)), clientv3.WithPrefix())
}
