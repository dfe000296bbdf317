package consumergroup

import (
	"maps"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/storage/offsetlog"
)

// The KIP-848 consumer group protocol (ConsumerGroupHeartbeat), as Apache
// 4.0's group coordinator runs it: GroupMetadataManager's
// consumerGroupHeartbeat, ConsumerGroup, CurrentAssignmentBuilder,
// TargetAssignmentBuilder and the uniform and range assignors. The files
// consumer_*.go and assignor*.go hold it; a Group is a consumer group when
// its cg field is set, and keeps its offsets either way.

// Error codes of the consumer group protocol.
var (
	errFencedMemberEpoch      = kerr.FencedMemberEpoch.Code
	errStaleMemberEpoch       = kerr.StaleMemberEpoch.Code
	errUnreleasedInstanceID   = kerr.UnreleasedInstanceID.Code
	errInvalidRequest         = kerr.InvalidRequest.Code
	errUnsupportedAssignor    = kerr.UnsupportedAssignor.Code
	errInvalidRegex           = kerr.InvalidRegularExpression.Code
	errUnsupportedVersion     = kerr.UnsupportedVersion.Code
	errGroupIDNotFoundMessage = "Group %s is not a consumer group."
)

// Epochs with a meaning in ConsumerGroupHeartbeat.
const (
	joinEpoch        = 0
	leaveEpoch       = -1
	staticLeaveEpoch = -2
)

// TopicID is a topic's id.
type TopicID = [16]byte

// Assignment is a set of partitions by topic id; every list is sorted and
// without duplicates, and no list is empty.
type Assignment map[TopicID][]int32

func (a Assignment) clone() Assignment {
	out := make(Assignment, len(a))
	for id, ps := range a {
		out[id] = slices.Clone(ps)
	}
	return out
}

func (a Assignment) equal(b Assignment) bool {
	return len(a) == len(b) && maps.EqualFunc(a, b, slices.Equal)
}

func (a Assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a Assignment) has(id TopicID, p int32) bool {
	_, ok := slices.BinarySearch(a[id], p)
	return ok
}

// sortedIDs lists the topic ids in byte order, for stable output.
func (a Assignment) sortedIDs() []TopicID {
	ids := slices.Collect(maps.Keys(a))
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	return ids
}

// add inserts p into id's list.
func (a Assignment) add(id TopicID, p int32) {
	ps := a[id]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[id] = slices.Insert(ps, i, p)
	}
}

// remove deletes p from id's list, dropping the list once empty.
func (a Assignment) remove(id TopicID, p int32) {
	ps := a[id]
	if i, ok := slices.BinarySearch(ps, p); ok {
		ps = slices.Delete(ps, i, i+1)
		if len(ps) == 0 {
			delete(a, id)
		} else {
			a[id] = ps
		}
	}
}

// toLog is the assignment as the log stores it.
func (a Assignment) toLog() []offsetlog.TopicPartitions {
	out := make([]offsetlog.TopicPartitions, 0, len(a))
	for _, id := range a.sortedIDs() {
		out = append(out, offsetlog.TopicPartitions{TopicID: id, Partitions: slices.Clone(a[id])})
	}
	return out
}

// assignmentOf builds an assignment from topic partitions (a request's or
// the log's), normalizing order and duplicates.
func assignmentOf(tps []offsetlog.TopicPartitions) Assignment {
	out := Assignment{}
	for _, tp := range tps {
		for _, p := range tp.Partitions {
			out.add(tp.TopicID, p)
		}
	}
	return out
}

// MemberState is a member's reconciliation state (Apache's MemberState,
// with its values as stored).
type MemberState int8

const (
	// MemberStable: the member owns its target assignment.
	MemberStable MemberState = 0
	// MemberUnrevokedPartitions: the member must revoke partitions
	// before it can move to the next epoch.
	MemberUnrevokedPartitions MemberState = 1
	// MemberUnreleasedPartitions: the member is at the target epoch but
	// waits for partitions other members have not released yet.
	MemberUnreleasedPartitions MemberState = 2
	// MemberUnknown: a state from a newer version.
	MemberUnknown MemberState = 127
)

func (s MemberState) String() string {
	switch s {
	case MemberStable:
		return "stable"
	case MemberUnrevokedPartitions:
		return "unrevoked_partitions"
	case MemberUnreleasedPartitions:
		return "unreleased_partitions"
	}
	return "unknown"
}

// ConsumerGroupState is a consumer group's state (Apache's
// ConsumerGroupState); its String is what ListGroups and
// ConsumerGroupDescribe report.
type ConsumerGroupState int8

const (
	ConsumerEmpty ConsumerGroupState = iota
	ConsumerAssigning
	ConsumerReconciling
	ConsumerStable
	ConsumerDead
)

func (s ConsumerGroupState) String() string {
	switch s {
	case ConsumerEmpty:
		return "Empty"
	case ConsumerAssigning:
		return "Assigning"
	case ConsumerReconciling:
		return "Reconciling"
	case ConsumerStable:
		return "Stable"
	}
	return "Dead"
}

// ConsumerGroupStates lists the states ListGroups may report for consumer
// groups, for metrics.
var ConsumerGroupStates = []ConsumerGroupState{ConsumerEmpty, ConsumerAssigning, ConsumerReconciling, ConsumerStable, ConsumerDead}

// OwnedTopic is one topic of the partitions a member reports it owns.
type OwnedTopic = offsetlog.TopicPartitions

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat as the group sees
// it. Nil fields mean unchanged since the member's last heartbeat.
type ConsumerHeartbeatRequest struct {
	Version              int16
	MemberID             string
	MemberEpoch          int32
	InstanceID           *string
	RackID               *string
	RebalanceTimeoutMs   int32 // -1: unchanged
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	ServerAssignor       *string
	Owned                []OwnedTopic // nil: unchanged
	ClientID             string
	ClientHost           string
	// CanDescribe says whether the member may describe a topic (its
	// principal's DESCRIBE ACL): a regex this heartbeat resolves keeps
	// only those topics, as Apache 4.0 (KAFKA-18813). nil: every topic.
	// Called on the group's actor: it must be safe from any goroutine.
	CanDescribe func(topic string) bool
}

// ConsumerHeartbeatResult is a ConsumerGroupHeartbeat answer.
type ConsumerHeartbeatResult struct {
	Err                 int16
	ErrMessage          *string
	MemberID            *string
	MemberEpoch         int32
	HeartbeatIntervalMs int32
	// Assignment is sent only when the member must learn it; nil
	// otherwise.
	Assignment Assignment
	// HasAssignment says Assignment is sent (it may be empty).
	HasAssignment bool
}

func heartbeatError(code int16, msg string) ConsumerHeartbeatResult {
	r := ConsumerHeartbeatResult{Err: code}
	if msg != "" {
		r.ErrMessage = &msg
	}
	return r
}

// Sorted is the assignment as topic partitions in topic id order.
func (a Assignment) Sorted() []OwnedTopic { return a.toLog() }
