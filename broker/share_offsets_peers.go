package broker

// The share-group offsets admin calls in a cluster (DescribeShareGroupOffsets,
// AlterShareGroupOffsets, DeleteShareGroupOffsets). As in Apache they are
// coordinator requests: the owner of the group's offsets slot answers
// them (NOT_COORDINATOR elsewhere) and checks what is its own — the
// group's members (NON_EMPTY_GROUP). The share-partitions are their
// partitions' owners', so the coordinator serves what it owns itself and
// sends the same request to every other live broker over the peer
// channel; a peer serves it for the share-partitions it owns only (a
// peer's call is neither routed again nor authorized again: the
// coordinator did both). The answers are merged: a partition's owner is
// the one broker answering it with a leader epoch (describe) or with
// anything but NOT_LEADER_OR_FOLLOWER (alter). A peer that cannot be
// asked is not left out silently: the partitions it owns are answered
// as Apache answers share-partitions whose share coordinator its
// persister could not reach — COORDINATOR_NOT_AVAILABLE on each such
// partition (alter) or topic (delete); describe treats them, as Apache
// does, as having no state (start offset and lag -1, no error).

import (
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/coord"
	"kaas/net/server"
	"kaas/state/ownership"
)

// shareOffsetsCall is how an offsets admin call is served here: peer
// says it came from the coordinator (serve the local share-partitions
// only, no authorization again), forward that the answer must gather the
// other brokers' too.
func (b *Broker) shareOffsetsCall(c *server.Call) (a auth.Access, peer, forward bool) {
	if b.cluster != nil && b.sec.IsPeer(c) {
		return auth.Access{}, true, false
	}
	return b.sec.Access(c), false, b.cluster != nil && b.peers != nil
}

// peerAnswers is what askPeers got: the answers, and the peers that
// could not be asked, in the view the request went out under.
type peerAnswers struct {
	got    []kmsg.Response
	view   *coord.View
	failed map[int32]bool
}

// unreachable says whether partition p of topic is owned by a peer that
// did not answer.
func (pa peerAnswers) unreachable(topic string, p int32) bool {
	o, ok := pa.view.Owners[ownership.PartitionUnit(topic, p)]
	return ok && pa.failed[o.Broker]
}

// askPeers sends a fresh request (made by mk) to every other live broker
// at once and returns what it got, in member order. It blocks, for the
// slowest peer (at most peerTimeout): call it off the event loops and
// actors. At once, because ListGroups and DeleteGroups in a cluster ask
// every peer: one after another, each peer that cannot answer would add
// its whole timeout.
func (b *Broker) askPeers(mk func() kmsg.Request) peerAnswers {
	view, members := b.clusterView()
	out := peerAnswers{view: view, failed: map[int32]bool{}}
	resps := make([]kmsg.Response, len(members))
	var wg sync.WaitGroup
	for i, id := range members {
		if id == b.cfg.BrokerID {
			continue
		}
		req := mk()
		wg.Go(func() {
			resp, err := b.peers.Request(id, req)
			if err != nil {
				b.log.Warn("a share-group call could not reach a peer",
					"api", req.Key(), "peer", id, "err", err)
				return
			}
			resps[i] = resp
		})
	}
	wg.Wait()
	for i, id := range members {
		switch {
		case id == b.cfg.BrokerID:
		case resps[i] == nil:
			out.failed[id] = true
		default:
			out.got = append(out.got, resps[i])
		}
	}
	return out
}

// mergeShareOffsets adds peers' DescribeShareGroupOffsets answers to
// ours: each partition's owner answers it with its leader epoch, the
// others with -1.
func mergeShareOffsets(ours *kmsg.DescribeShareGroupOffsetsResponse, peers peerAnswers) {
	for _, r := range peers.got {
		theirs, ok := r.(*kmsg.DescribeShareGroupOffsetsResponse)
		if !ok {
			continue
		}
		for _, tg := range theirs.Groups {
			for gi := range ours.Groups {
				og := &ours.Groups[gi]
				if og.GroupID != tg.GroupID || og.ErrorCode != 0 || tg.ErrorCode != 0 {
					continue
				}
				mergeShareOffsetTopics(og, tg.Topics)
			}
		}
	}
}

func mergeShareOffsetTopics(og *kmsg.DescribeShareGroupOffsetsResponseGroup, topics []kmsg.DescribeShareGroupOffsetsResponseGroupTopic) {
	for _, tt := range topics {
		ti := -1
		for i := range og.Topics {
			if og.Topics[i].Topic == tt.Topic {
				ti = i
			}
		}
		if ti < 0 {
			og.Topics = append(og.Topics, tt)
			continue
		}
		ot := &og.Topics[ti]
		for _, tp := range tt.Partitions {
			pi := -1
			for i := range ot.Partitions {
				if ot.Partitions[i].Partition == tp.Partition {
					pi = i
				}
			}
			switch {
			case pi < 0:
				ot.Partitions = append(ot.Partitions, tp)
			case ot.Partitions[pi].LeaderEpoch < 0 && ot.Partitions[pi].ErrorCode == 0 && (tp.LeaderEpoch >= 0 || tp.ErrorCode != 0):
				ot.Partitions[pi] = tp
			}
		}
	}
}

// mergeShareAlter adds peers' AlterShareGroupOffsets answers to ours: a
// partition we do not own (NOT_LEADER_OR_FOLLOWER) takes its owner's
// code, COORDINATOR_NOT_AVAILABLE if its owner could not be asked.
func mergeShareAlter(ours *kmsg.AlterShareGroupOffsetsResponse, peers peerAnswers) {
	notLeader := kerr.NotLeaderForPartition.Code
	for ti := range ours.Topics {
		ot := &ours.Topics[ti]
		for pi := range ot.Partitions {
			if op := &ot.Partitions[pi]; op.ErrorCode == notLeader && peers.unreachable(ot.Topic, op.Partition) {
				op.ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
		}
	}
	for _, r := range peers.got {
		theirs, ok := r.(*kmsg.AlterShareGroupOffsetsResponse)
		if !ok || theirs.ErrorCode != 0 {
			continue
		}
		for _, tt := range theirs.Topics {
			for ti := range ours.Topics {
				ot := &ours.Topics[ti]
				if ot.Topic != tt.Topic {
					continue
				}
				for _, tp := range tt.Partitions {
					for pi := range ot.Partitions {
						if op := &ot.Partitions[pi]; op.Partition == tp.Partition && op.ErrorCode == notLeader && tp.ErrorCode != notLeader {
							op.ErrorCode = tp.ErrorCode
						}
					}
				}
			}
		}
	}
}

// mergeShareDelete adds peers' DeleteShareGroupOffsets answers to ours:
// the group exists if any broker found it (GROUP_ID_NOT_FOUND from a
// broker that keeps none of its share-partitions says nothing). A topic
// with a partition whose owner could not be asked is
// COORDINATOR_NOT_AVAILABLE: its share-partitions there are not deleted
// (Apache answers a topic whose persister delete failed on a partition
// with that partition's code). parts is each topic's partition count.
func mergeShareDelete(ours *kmsg.DeleteShareGroupOffsetsResponse, peers peerAnswers, topics []kmsg.DeleteShareGroupOffsetsResponseTopic, parts map[string]int32) {
	missed := false // a topic with a partition no one could be asked for
	if len(peers.failed) > 0 {
		topics = slices.Clone(topics)
		for i := range topics {
			t := &topics[i]
			for p := range parts[t.Topic] {
				if t.ErrorCode == 0 && peers.unreachable(t.Topic, p) {
					t.ErrorCode, missed = kerr.CoordinatorNotAvailable.Code, true
				}
			}
		}
		if ours.ErrorCode == 0 {
			ours.Topics = topics
		}
	}
	for _, r := range peers.got {
		theirs, ok := r.(*kmsg.DeleteShareGroupOffsetsResponse)
		if !ok {
			continue
		}
		if ours.ErrorCode == kerr.GroupIDNotFound.Code && theirs.ErrorCode == 0 {
			ours.ErrorCode, ours.Topics = 0, topics
		}
		if ours.ErrorCode == 0 && theirs.ErrorCode != 0 && theirs.ErrorCode != kerr.GroupIDNotFound.Code {
			// A peer failed to delete its share-partitions.
			ours.ErrorCode, ours.Topics = theirs.ErrorCode, nil
		}
	}
	if missed && ours.ErrorCode == kerr.GroupIDNotFound.Code {
		// Only the peers that did not answer may keep the group.
		ours.ErrorCode = kerr.CoordinatorNotAvailable.Code
	}
}
