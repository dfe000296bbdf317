package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/coord"
)

// The coordinator (broker 1) merging the offsets admin calls' answers
// when one peer could not be asked: broker 2 owns t-0 and u-0 and
// answered, broker 3 owns t-1 and did not. t-1 must not be answered as
// if nothing were wrong there (it used to be left out silently).
func unreachableThree(got ...kmsg.Response) peerAnswers {
	return peerAnswers{
		got: got,
		view: &coord.View{Owners: map[string]coord.Owner{
			"p/t/0": {Broker: 2}, "p/t/1": {Broker: 3}, "p/u/0": {Broker: 2},
		}},
		failed: map[int32]bool{3: true},
	}
}

func TestMergeShareAlterUnreachablePeer(t *testing.T) {
	notLeader := kerr.NotLeaderForPartition.Code
	alter := func(codes ...int16) *kmsg.AlterShareGroupOffsetsResponse {
		r := kmsg.NewPtrAlterShareGroupOffsetsResponse()
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = "t"
		for p, c := range codes {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = int32(p), c
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
		return r
	}
	ours := alter(notLeader, notLeader)
	mergeShareAlter(ours, unreachableThree(alter(0, notLeader)))
	got := ours.Topics[0].Partitions
	if got[0].ErrorCode != 0 || got[1].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("t-0 %d, t-1 %d; want 0 (its owner's answer) and COORDINATOR_NOT_AVAILABLE (its owner unreachable)", got[0].ErrorCode, got[1].ErrorCode)
	}
}

func TestMergeShareDeleteUnreachablePeer(t *testing.T) {
	topics := func() []kmsg.DeleteShareGroupOffsetsResponseTopic {
		var out []kmsg.DeleteShareGroupOffsetsResponseTopic
		for _, n := range []string{"t", "u"} {
			rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			rt.Topic = n
			out = append(out, rt)
		}
		return out
	}
	parts := map[string]int32{"t": 2, "u": 1}
	answer := func(code int16) *kmsg.DeleteShareGroupOffsetsResponse {
		r := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
		r.ErrorCode = code
		if code == 0 {
			r.Topics = topics()
		}
		return r
	}

	// The group known here: t is not deleted on broker 3, u is.
	ours := answer(0)
	mergeShareDelete(ours, unreachableThree(answer(0)), topics(), parts)
	if ours.ErrorCode != 0 || len(ours.Topics) != 2 {
		t.Fatalf("answer %+v", ours)
	}
	if c := ours.Topics[0].ErrorCode; c != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("t (a partition on the unreachable peer): %d, want COORDINATOR_NOT_AVAILABLE", c)
	}
	if c := ours.Topics[1].ErrorCode; c != 0 {
		t.Errorf("u (every partition on a peer that answered): %d, want 0", c)
	}

	// The group known only to a peer that answered: the same.
	ours = answer(kerr.GroupIDNotFound.Code)
	mergeShareDelete(ours, unreachableThree(answer(0)), topics(), parts)
	if ours.ErrorCode != 0 || len(ours.Topics) != 2 || ours.Topics[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("group on a peer: %+v", ours)
	}

	// Known to no broker that answered: only the unreachable one may
	// keep it, so the answer cannot be GROUP_ID_NOT_FOUND.
	ours = answer(kerr.GroupIDNotFound.Code)
	mergeShareDelete(ours, unreachableThree(answer(kerr.GroupIDNotFound.Code)), topics(), parts)
	if ours.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("group nowhere that answered: %d, want COORDINATOR_NOT_AVAILABLE", ours.ErrorCode)
	}

	// Every peer answered: nothing changes.
	ours = answer(0)
	all := unreachableThree(answer(0))
	all.failed = map[int32]bool{}
	mergeShareDelete(ours, all, topics(), parts)
	if ours.Topics[0].ErrorCode != 0 || ours.Topics[1].ErrorCode != 0 {
		t.Fatalf("every peer answered: %+v", ours.Topics)
	}
}
