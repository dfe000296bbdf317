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
)

func init() {
	register(api{key: 79, min: 0, max: 2, serve: serveShareAcknowledge, fail: failShareAcknowledge})
}

// serveShareAcknowledge serves ShareAcknowledge (key 79), versions 0–2
// (KIP-932; v2 IsRenewAck and the Renew acknowledgement, KIP-1222).
//
// Acknowledges records outside a fetch, in the member's share session:
// epoch 0 cannot open one (INVALID_SHARE_SESSION_EPOCH), a positive epoch
// must be the session's next (INVALID_SHARE_SESSION_EPOCH,
// SHARE_SESSION_NOT_FOUND) and -1 closes it, releasing what the member
// still holds on its partitions. Each partition's batches are applied all
// or nothing with the same codes as ShareFetch's piggybacked ones
// (INVALID_RECORD_STATE, INVALID_REQUEST). With the authorizer: READ on
// the group and on each topic. In a cluster, a partition owned elsewhere
// is NOT_LEADER_OR_FOLLOWER (as ShareFetch).
func serveShareAcknowledge(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	resp.AcquisitionLockTimeoutMillis = int32(b.cfg.ShareRecordLockDuration.Milliseconds())
	fail := func(code int16) kmsg.Response {
		resp.ErrorCode = code
		return resp
	}
	group, member := deref(req.GroupID), deref(req.MemberID)
	a := b.sec.Access(c)
	if code := b.shareMemberCode(c, a, "ShareAcknowledge", group, member); code != 0 {
		return fail(code)
	}
	if b.isOtherGroupType(group) {
		return fail(kerr.GroupIDNotFound.Code)
	}
	renew := req.Version >= 2 && req.IsRenewAck
	m := &messages.ShareFetch{AllowRenew: renew, AckOnly: true, CanRead: shareCanRead(a)}
	m.Session = sharegroup.SessionRequest{Group: group, Member: member, Epoch: req.ShareSessionEpoch, Acknowledge: true}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			ack := messages.ShareAcks{TP: model.TopicIDPartition{Topic: t.TopicID, Partition: p.Partition}}
			for _, ab := range p.AcknowledgementBatches {
				ack.Batches = append(ack.Batches, ackBatch(ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes))
			}
			m.Acks = append(m.Acks, ack)
		}
	}
	m.Session.HasAcks = len(m.Acks) > 0
	m.Reply = func(res messages.ShareFetchResult) { c.Reply(shareAcknowledgeResponse(resp, res)) }
	b.shares.Send(m)
	return nil
}

func shareAcknowledgeResponse(resp *kmsg.ShareAcknowledgeResponse, res messages.ShareFetchResult) *kmsg.ShareAcknowledgeResponse {
	resp.ErrorCode = res.Code
	if res.Code != 0 {
		return resp
	}
	idx := map[sharegroup.TopicID]int{}
	for _, p := range res.Partitions {
		i, ok := idx[p.TP.Topic]
		if !ok {
			i = len(resp.Topics)
			idx[p.TP.Topic] = i
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = p.TP.Topic
			resp.Topics = append(resp.Topics, t)
		}
		rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.TP.Partition, p.AckCode
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

func failShareAcknowledge(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	resp.ErrorCode = code
	return resp
}

// shareMemberCode is the first check of ShareFetch and ShareAcknowledge:
// READ on the group, then a group id and a member id of at most 36
// bytes (a UUID's text), as Apache's share handlers check them.
func (b *Broker) shareMemberCode(c *server.Call, a auth.Access, api, group, member string) int16 {
	if !a.Group(acl.Read, group) {
		return kerr.GroupAuthorizationFailed.Code
	}
	if member == "" || len(member) > 36 || group == "" {
		b.log.Info(api+" refused: no group or member id", "group", group, "member", member, "client", c.ClientID)
		return kerr.InvalidRequest.Code
	}
	return 0
}
