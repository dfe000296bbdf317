package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/messages"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/consumergroup"
)

func init() {
	register(api{key: 69, min: 0, max: 1, serve: serveConsumerGroupDescribe, fail: failConsumerGroupDescribe})
}

// serveConsumerGroupDescribe serves ConsumerGroupDescribe (key 69),
// versions 0–1 (KIP-848).
//
// One answer per group asked (Apache's consumerGroupDescribe): state,
// group and assignment epochs, the assignor, and every member with its
// epoch, subscription, current assignment and target assignment (topics
// by id and name). A group that does not exist, or is a classic group, is
// GROUP_ID_NOT_FOUND; an empty id INVALID_GROUP_ID. With the authorizer
// on: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), and DESCRIBE on
// every topic its members read or hold (else TOPIC_AUTHORIZATION_FAILED
// for the group), as Apache 4.0; authorized operations when asked for.
// Version notes: v1 adds each member's type (1: consumer protocol).
func serveConsumerGroupDescribe(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(req.Groups))
	a := b.sec.Access(c)
	g := newGather(func() { c.Reply(resp) })
	for i, id := range req.Groups {
		out := &resp.Groups[i]
		*out = kmsg.NewConsumerGroupDescribeResponseGroup()
		out.Group = id
		if !a.Group(acl.Describe, id) {
			out.ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if out.ErrorCode = b.groupStatus(id, false); out.ErrorCode != 0 {
			continue
		}
		if req.IncludeAuthorizedOperations {
			out.AuthorizedOperations = a.Operations(acl.Group, id)
		}
		g.add()
		msg := &messages.ConsumerDescribe{Reply: func(d consumergroup.ConsumerDescription) {
			fillConsumerGroup(out, d)
			if out.ErrorCode == 0 && !describableTopics(a, d) {
				// Apache 4.0 hides a group whose members read topics
				// the client may not describe.
				*out = kmsg.NewConsumerGroupDescribeResponseGroup()
				out.Group, out.ErrorCode = id, kerr.TopicAuthorizationFailed.Code
				out.ErrorMessage = kmsg.StringPtr("The group has described topic(s) that the client is not authorized to describe.")
			}
			g.done()
		}}
		if b.sendToGroup(id, false, msg) != routed {
			out.ErrorCode = kerr.GroupIDNotFound.Code
			g.done()
		}
	}
	g.done()
	return nil
}

// describableTopics reports whether every topic the group's members read
// or hold may be described.
func describableTopics(a auth.Access, d consumergroup.ConsumerDescription) bool {
	names := func(yield func(string) bool) {
		for _, m := range d.Members {
			for _, t := range m.SubscribedTopicNames {
				if !yield(t) {
					return
				}
			}
			for _, ts := range [][]consumergroup.DescribedTopic{m.Assignment, m.TargetAssignment} {
				for _, t := range ts {
					if !yield(t.Name) {
						return
					}
				}
			}
		}
	}
	allowed := a.Topics(acl.Describe, names)
	for n := range names {
		if !auth.AllowedIn(allowed, n) {
			return false
		}
	}
	return true
}

func fillConsumerGroup(out *kmsg.ConsumerGroupDescribeResponseGroup, d consumergroup.ConsumerDescription) {
	if out.ErrorCode = d.Err; d.Err != 0 {
		return
	}
	out.State, out.Epoch, out.AssignmentEpoch, out.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName
	assignment := func(ts []consumergroup.DescribedTopic) kmsg.Assignment {
		a := kmsg.NewAssignment()
		a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
		for _, t := range ts {
			tp := kmsg.NewAssignmentTopicPartition()
			tp.TopicID, tp.Topic, tp.Partitions = t.ID, t.Name, t.Partitions
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		return a
	}
	for _, m := range d.Members {
		rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		rm.MemberID, rm.InstanceID, rm.RackID, rm.MemberEpoch = m.MemberID, m.InstanceID, m.RackID, m.MemberEpoch
		rm.ClientID, rm.ClientHost = m.ClientID, m.ClientHost
		rm.SubscribedTopics, rm.SubscribedTopicRegex = m.SubscribedTopicNames, m.SubscribedTopicRegex
		rm.Assignment, rm.TargetAssignment = assignment(m.Assignment), assignment(m.TargetAssignment)
		rm.MemberType = 1 // the consumer protocol
		if m.Classic {
			rm.MemberType = 0
		}
		out.Members = append(out.Members, rm)
	}
}

func failConsumerGroupDescribe(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group, g.ErrorCode = id, code
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
