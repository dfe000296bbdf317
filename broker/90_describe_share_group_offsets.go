package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/messages"
	"kaas/model"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/sharegroup"
	"kaas/storage/topicstore"
)

func init() {
	register(api{key: 90, min: 0, max: 1, serve: serveDescribeShareGroupOffsets, fail: failDescribeShareGroupOffsets})
}

// serveDescribeShareGroupOffsets serves DescribeShareGroupOffsets (key 90),
// versions 0–1 (KIP-932; v1's Lag, KIP-1226).
//
// Each share-partition's start offset (SPSO) and leader epoch, and from
// v1 its lag: the records below the high watermark not yet acknowledged
// or archived (HWM − SPSO − those done inside the window). Topics nil
// asks for every share-partition the group has; a partition with no share
// state (never fetched, or no such group) is StartOffset and Lag -1
// without an error, as Apache answers. With the authorizer: DESCRIBE on
// the group (GROUP_AUTHORIZATION_FAILED) and on each topic (named ones
// TOPIC_AUTHORIZATION_FAILED, the describe-all leaves them out). In a
// cluster, served by the group's coordinator (NOT_COORDINATOR elsewhere)
// with every partition owner's share state (share_offsets_peers.go).
func serveDescribeShareGroupOffsets(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeShareGroupOffsetsRequest)
	a, peer, forward := b.shareOffsetsCall(c)
	ids := make([]string, 0, len(req.Groups))
	status := make([]int16, len(req.Groups))
	for i, g := range req.Groups {
		ids = append(ids, g.GroupID)
		if !peer {
			status[i] = b.groupSlotStatus(g.GroupID)
		}
	}
	b.shares.Send(&messages.ShareDescribe{Groups: ids, Reply: func(ds []sharegroup.Description) {
		resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
		fwd := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		for i, rg := range req.Groups {
			out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			out.GroupID = rg.GroupID
			switch {
			case !a.Group(acl.Describe, rg.GroupID):
				out.ErrorCode = kerr.GroupAuthorizationFailed.Code
			case status[i] != 0:
				out.ErrorCode = status[i]
			default:
				out.Topics = b.shareOffsets(a, rg, ds[i])
				fwd.Groups = append(fwd.Groups, rg)
			}
			resp.Groups = append(resp.Groups, out)
		}
		if !forward || len(fwd.Groups) == 0 {
			c.Reply(resp)
			return
		}
		go func() {
			mergeShareOffsets(resp, b.askPeers(func() kmsg.Request { r := *fwd; return &r }))
			c.Reply(resp)
		}()
	}})
	return nil
}

// shareOffsets answers one group's topics from its description.
func (b *Broker) shareOffsets(a auth.Access, rg kmsg.DescribeShareGroupOffsetsRequestGroup, d sharegroup.Description) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	topics := b.topics.load()
	have := map[model.TopicIDPartition]sharegroup.PartitionDescription{}
	for _, p := range d.Partitions {
		have[p.TP] = p
	}
	type ask struct {
		name  string
		parts []int32
	}
	var asks []ask
	all := rg.Topics == nil
	if all {
		byTopic := map[string][]int32{}
		var order []string
		for _, p := range d.Partitions {
			t := topics.byID[topicstore.UUID(p.TP.Topic)]
			if t == nil {
				continue
			}
			if byTopic[t.meta.Name] == nil {
				order = append(order, t.meta.Name)
			}
			byTopic[t.meta.Name] = append(byTopic[t.meta.Name], p.TP.Partition)
		}
		for _, n := range order {
			asks = append(asks, ask{n, byTopic[n]})
		}
	} else {
		for _, rt := range rg.Topics {
			asks = append(asks, ask{rt.Topic, rt.Partitions})
		}
	}
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, q := range asks {
		ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		ot.Topic = q.name
		t := topics.byName[q.name]
		if t != nil {
			ot.TopicID = t.meta.ID
		}
		denied := !a.Topic(acl.Describe, q.name)
		if denied && all {
			continue
		}
		for _, p := range q.parts {
			op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			op.Partition, op.StartOffset, op.Lag, op.LeaderEpoch = p, -1, -1, -1
			switch {
			case denied:
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || p < 0 || int(p) >= len(t.parts) || t.parts[p] == nil:
				// No data: as Apache, not an error.
			default:
				v := t.parts[p].View()
				op.LeaderEpoch = v.LeaderEpoch
				if sp, ok := have[model.TopicIDPartition{Topic: t.meta.ID, Partition: p}]; ok {
					op.StartOffset = sp.Start
					op.Lag = max(0, v.HighWatermark-sp.Start-int64(sp.Done))
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out = append(out, ot)
	}
	return out
}

func failDescribeShareGroupOffsets(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, g := range req.Groups {
		out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		out.GroupID, out.ErrorCode = g.GroupID, code
		resp.Groups = append(resp.Groups, out)
	}
	return resp
}
