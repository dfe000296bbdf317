package broker

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 43, min: 0, max: 2, blocking: true, serve: serveElectLeaders, fail: failElectLeaders})
}

const (
	electPreferred = 0
	electUnclean   = 1
	// electWaitMax bounds how long an election waits for its hand-offs.
	electWaitMax = 30 * time.Second
)

// election is one partition's election.
type election struct {
	topic     string
	partition int32
	unit      string
	code      int16
	msg       *string
}

// serveElectLeaders serves ElectLeaders (key 43), versions 0–2.
//
// A kaas partition has one replica, its owner, and the preferred leader is
// the broker that should own it (cluster_reassignments.go: an operator's
// reassignment to a live broker, else the rendezvous choice among the live
// brokers). The ownership loops always move a partition to that broker by
// the graceful hand-off; an election asks for it now and waits (up to the
// request's timeout) until the preferred broker leads, as Apache's
// controller answers once the new leader is recorded.
//
// As Apache's controller (ReplicationControlManager.electLeaders):
// PREFERRED (0) on a partition led by its preferred broker, and UNCLEAN
// (1) on one that has a leader, are ELECTION_NOT_NEEDED; UNCLEAN on one
// between owners waits for the next owner; an unknown topic or partition
// is UNKNOWN_TOPIC_OR_PARTITION; a preferred broker that does not lead in
// time PREFERRED_LEADER_NOT_AVAILABLE. A null topic list elects every
// partition (internal topics' too) and answers only those that needed an
// election. Another election type is INVALID_REQUEST. A single broker
// leads everything: every election is ELECTION_NOT_NEEDED.
//
// ACL: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED on the
// request (v1+) and every partition. Blocking: it waits for hand-offs.
func serveElectLeaders(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ElectLeadersRequest)
	if !b.sec.Access(c).Cluster(acl.Alter) {
		return failElectLeaders(req, kerr.ClusterAuthorizationFailed.Code)
	}
	how := req.ElectionType
	if req.Version == 0 {
		how = electPreferred
	}
	if how != electPreferred && how != electUnclean {
		resp := failElectLeaders(req, kerr.InvalidRequest.Code).(*kmsg.ElectLeadersResponse)
		b.log.Info("elect leaders: unknown election type", "type", how)
		return resp
	}
	var es []*election
	if req.Topics == nil {
		for _, t := range sortedTopics(b.topics.load()) {
			for p := int32(0); p < int32(len(t.parts)); p++ {
				es = append(es, b.newElection(t.meta.Name, p))
			}
		}
		for _, it := range sortedInternalTopics() {
			for p := int32(0); p < it.partitions; p++ {
				es = append(es, b.newElection(it.name, p))
			}
		}
	} else {
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				es = append(es, b.newElection(rt.Topic, p))
			}
		}
	}
	b.elect(es, how, time.Duration(req.TimeoutMillis)*time.Millisecond)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	for _, e := range es {
		if req.Topics == nil && e.code == kerr.ElectionNotNeeded.Code {
			continue // as Apache: only the partitions that needed one
		}
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != e.topic {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = e.topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewElectLeadersResponseTopicPartition()
		p.Partition, p.ErrorCode, p.ErrorMessage = e.partition, e.code, e.msg
		t := &resp.Topics[len(resp.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	return resp
}

func (b *Broker) newElection(topic string, p int32) *election {
	e := &election{topic: topic, partition: p}
	unit, ok := b.unitOf(topic, p)
	if !ok {
		e.code = kerr.UnknownTopicOrPartition.Code
		e.msg = kmsg.StringPtr(fmt.Sprintf("No such partition as %s-%d", topic, p))
		return e
	}
	e.unit = unit
	return e
}

// elect settles each election: not needed, or done once the preferred
// broker leads (waiting up to timeout, bounded by electWaitMax).
func (b *Broker) elect(es []*election, how int8, timeout time.Duration) {
	if timeout <= 0 || timeout > electWaitMax {
		timeout = electWaitMax
	}
	deadline := time.Now().Add(timeout)
	var waiting []*election
	v, members := b.clusterView()
	for _, e := range es {
		if e.unit == "" {
			continue
		}
		cur := b.currentOwner(v, e.unit)
		switch {
		case how == electPreferred && cur == preferredOwner(v, e.unit, members):
			e.code = kerr.ElectionNotNeeded.Code
		case how == electUnclean && cur >= 0:
			e.code = kerr.ElectionNotNeeded.Code
		default:
			waiting = append(waiting, e)
		}
	}
	if len(waiting) == 0 {
		return
	}
	b.kickOwnership()
	for len(waiting) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // the view changes through etcd's watch
		v, members = b.clusterView()
		left := waiting[:0]
		for _, e := range waiting {
			cur := b.currentOwner(v, e.unit)
			if (how == electPreferred && cur == preferredOwner(v, e.unit, members)) || (how == electUnclean && cur >= 0) {
				continue // elected
			}
			left = append(left, e)
		}
		waiting = left
	}
	for _, e := range waiting {
		if how == electPreferred {
			e.code = kerr.PreferredLeaderNotAvailable.Code
		} else {
			e.code = kerr.EligibleLeadersNotAvailable.Code
		}
		e.msg = kmsg.StringPtr("the partition's preferred broker did not take it over in time")
	}
}

func failElectLeaders(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = code
	for _, rt := range req.Topics {
		t := kmsg.NewElectLeadersResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			tp := kmsg.NewElectLeadersResponseTopicPartition()
			tp.Partition, tp.ErrorCode = p, code
			t.Partitions = append(t.Partitions, tp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
