package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/messages"
	"kaas/model"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/consumergroup"
)

func init() {
	register(api{key: 9, min: 0, max: 9, serve: serveOffsetFetch, fail: failOffsetFetch})
}

// fetchedGroup is one group's OffsetFetch answer.
type fetchedGroup struct {
	code    int16
	offsets []consumergroup.FetchedOffset
}

// serveOffsetFetch serves OffsetFetch (key 9), versions 0–9.
//
// Apache's handleOffsetFetchRequest: committed offsets regardless of the
// group's state; -1 (no error) for partitions without one, whether or not
// the topic exists; a group that does not exist has no offsets. Null
// topics (v2+) ask for every committed partition. RequireStable (v7+)
// answers UNSTABLE_OFFSET_COMMIT for partitions with a commit in flight or
// offsets staged by an open transaction (R-RC-6). v2+ carry a top-level
// error; v8+ batch groups, each with its own error; v9's member id and
// epoch name a KIP-848 consumer group member, checked as Apache 4.0 does
// (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH for the whole group) and ignored
// for classic groups.
//
// With --authorizer: DESCRIBE on the group; topics the principal may not
// DESCRIBE are TOPIC_AUTHORIZATION_FAILED when named and left out of a
// fetch of everything (fetchGroupOffsets).
func serveOffsetFetch(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	a := b.sec.Access(c)
	if req.Version < 8 {
		var tps []model.TopicPartition
		if req.Topics != nil || req.Version < 2 {
			tps = []model.TopicPartition{}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					tps = append(tps, model.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
		}
		b.fetchGroupOffsets(a, req.Group, tps, req.RequireStable, nil, -1, func(f fetchedGroup) {
			resp.ErrorCode = f.code
			if f.code != 0 && req.Version < 2 {
				// v0–1 have no top-level error: every partition carries it.
				f.offsets = consumergroup.UnknownOffsets(tps)
				for i := range f.offsets {
					f.offsets[i].Err = f.code
				}
			}
			for _, t := range groupByTopic(f.offsets) {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t[0].TP.Topic
				for _, o := range t {
					p := kmsg.NewOffsetFetchResponseTopicPartition()
					p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = o.TP.Partition, o.Offset, o.LeaderEpoch, kmsg.StringPtr(o.Metadata), o.Err
					rt.Partitions = append(rt.Partitions, p)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			c.Reply(resp)
		})
		return nil
	}
	results := make([]fetchedGroup, len(req.Groups))
	g := newGather(func() {
		for i, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, results[i].code
			for _, t := range groupByTopic(results[i].offsets) {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t[0].TP.Topic
				for _, o := range t {
					p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = o.TP.Partition, o.Offset, o.LeaderEpoch, kmsg.StringPtr(o.Metadata), o.Err
					rt.Partitions = append(rt.Partitions, p)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		c.Reply(resp)
	})
	for i, rg := range req.Groups {
		var tps []model.TopicPartition
		if rg.Topics != nil {
			tps = []model.TopicPartition{}
			for _, t := range rg.Topics {
				for _, p := range t.Partitions {
					tps = append(tps, model.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
		}
		g.add()
		b.fetchGroupOffsets(a, rg.Group, tps, req.RequireStable, rg.MemberID, rg.MemberEpoch, func(f fetchedGroup) {
			results[i] = f
			g.done()
		})
	}
	g.done()
	return nil
}

// fetchGroupOffsets reads one group's offsets (tps nil: all) and calls
// reply exactly once. memberID and epoch name a consumer group member
// (v9), nil and -1 none.
// With the authorizer on (Apache's handleOffsetFetchRequestFromCoordinator):
// DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), and on each topic:
// a named topic the principal may not describe gets
// TOPIC_AUTHORIZATION_FAILED, and a fetch of every offset leaves such
// topics out.
func (b *Broker) fetchGroupOffsets(a auth.Access, group string, tps []model.TopicPartition, requireStable bool, memberID *string, epoch int32, reply func(fetchedGroup)) {
	if !a.Group(acl.Describe, group) {
		reply(fetchedGroup{code: kerr.GroupAuthorizationFailed.Code})
		return
	}
	if code := b.groupStatus(group, true); code != 0 {
		reply(fetchedGroup{code: code})
		return
	}
	if b.isShareGroup(group) {
		// Apache's ShareGroup.validateOffsetFetch: "Group ... is not a
		// consumer group."
		b.log.Info("offset fetch refused: the group is a share group", "group", group)
		reply(fetchedGroup{code: kerr.GroupIDNotFound.Code})
		return
	}
	var denied []consumergroup.FetchedOffset
	if tps != nil && a.On() {
		described := a.Topics(acl.Describe, auth.NamesOf(tps, func(tp *model.TopicPartition) string { return tp.Topic }))
		kept := []model.TopicPartition{}
		for _, tp := range tps {
			if described[tp.Topic] {
				kept = append(kept, tp)
			} else {
				denied = append(denied, consumergroup.FetchedOffset{TP: tp, Offset: -1, LeaderEpoch: -1, Err: kerr.TopicAuthorizationFailed.Code})
			}
		}
		tps = kept
	}
	done := func(code int16, o []consumergroup.FetchedOffset) {
		if code != 0 {
			reply(fetchedGroup{code: code})
			return
		}
		if tps == nil && a.On() {
			kept := o[:0:0]
			for _, f := range o {
				if a.Visible(acl.Describe, acl.Topic, f.TP.Topic) {
					kept = append(kept, f)
				}
			}
			o = kept
		}
		reply(fetchedGroup{offsets: append(o, denied...)})
	}
	msg := &messages.FetchOffsets{Partitions: tps, RequireStable: requireStable, MemberID: memberID, MemberEpoch: epoch, Reply: done}
	if b.sendToGroup(group, false, msg) != routed {
		done(0, consumergroup.UnknownOffsets(tps))
	}
}

// groupByTopic splits offsets into runs per topic, topics in order of
// first appearance.
func groupByTopic(offsets []consumergroup.FetchedOffset) [][]consumergroup.FetchedOffset {
	idx := map[string]int{}
	var out [][]consumergroup.FetchedOffset
	for _, o := range offsets {
		i, ok := idx[o.TP.Topic]
		if !ok {
			i = len(out)
			idx[o.TP.Topic] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], o)
	}
	return out
}

func failOffsetFetch(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.ErrorCode = code
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.ErrorCode, rp.Metadata = p, -1, code, kmsg.StringPtr("")
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, g := range req.Groups {
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
