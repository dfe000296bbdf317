package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/topics"
	"kaas/storage/topicstore"
)

func init() {
	register(api{key: 3, min: 0, max: 13, blocking: true, serve: serveMetadata, fail: failMetadata})
}

// serveMetadata serves Metadata (key 3), versions 0–13 (v13's top-level
// error code, KIP-1102's rebootstrap signal, is always 0: kaas never asks a
// client to rebootstrap).
//
// A null topic list means every topic, an empty one none. Topics named in
// the request are auto-created when the broker allows it and, from v4, the
// request does too (AllowAutoTopicCreation); v0–3 always allow it. The
// request that creates a topic gets it back as Apache's KRaft broker
// answers it (AutoTopicCreationManager): UNKNOWN_TOPIC_OR_PARTITION, no
// partitions, no id — the next Metadata shows it. From v10
// topics may be named by id. A single broker leads every partition at
// leader epoch 0; in a cluster the leader and epoch are the partition's
// owner key in etcd (LEADER_NOT_AVAILABLE between owners), the broker list
// is the live members and the controller the lowest live id. The one
// replica of a partition is its leader: the data is on the shared volume.
// The internal topics
// __consumer_offsets and __transaction_state are listed too, with
// is_internal set (topic_internal.go). Blocking: auto-creation writes
// topic metadata durably.
//
// With the authorizer on (as Apache's handleTopicMetadataRequest): a full
// listing leaves out topics the principal may not DESCRIBE; a named one
// it may not describe is TOPIC_AUTHORIZATION_FAILED whether or not it
// exists; auto-creation needs CREATE on the cluster or the topic
// (TOPIC_AUTHORIZATION_FAILED otherwise). Authorized-operation bit fields
// are filled when asked (v8+).
func serveMetadata(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, m := range b.liveBrokers(c.Session().Listener) {
		broker := kmsg.NewMetadataResponseBroker()
		broker.NodeID, broker.Host, broker.Port = m.ID, m.Host, m.Port
		if m.Rack != "" {
			rack := m.Rack
			broker.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, broker)
	}
	resp.ClusterID = &b.clusterID
	resp.ControllerID = b.controllerID()
	a := b.sec.Access(c)
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if a.Cluster(acl.Describe) {
			resp.AuthorizedOperations = a.Operations(acl.Cluster, acl.ClusterName)
		}
	}
	withOps := func(mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
		if req.Version >= 8 && req.IncludeTopicAuthorizedOperations && mt.ErrorCode == 0 {
			mt.AuthorizedOperations = a.Operations(acl.Topic, *mt.Topic)
		}
		return mt
	}

	allowCreate := req.Version < 4 || req.AllowAutoTopicCreation
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		// Every topic the principal may describe; the others are left
		// out without a trace, as Apache does for a full listing.
		for _, t := range sortedTopics(b.topics.load()) {
			if a.Visible(acl.Describe, acl.Topic, t.meta.Name) {
				resp.Topics = append(resp.Topics, withOps(b.metadataTopic(t)))
			}
		}
		for _, it := range sortedInternalTopics() {
			if a.Visible(acl.Describe, acl.Topic, it.name) {
				resp.Topics = append(resp.Topics, withOps(b.metadataInternalTopic(it)))
			}
		}
		return resp
	}
	for _, rt := range req.Topics {
		var t *topic
		var name string
		if rt.Topic != nil {
			name = *rt.Topic
			t = b.topics.load().byName[name]
		} else {
			t = b.topics.load().byID[topicstore.UUID(rt.TopicID)]
			if t != nil {
				name = t.meta.Name
			}
		}
		it := internalFor(rt.Topic, rt.TopicID)
		if it != nil {
			name = it.name
		}
		// Whether a topic the principal may not describe exists is not
		// told: named, it is TOPIC_AUTHORIZATION_FAILED with no id; by
		// id (not secret), the id comes back with no name.
		if (rt.Topic != nil || t != nil || it != nil) && !a.Topic(acl.Describe, name) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			if rt.Topic != nil {
				mt.Topic = rt.Topic
			} else {
				mt.TopicID = rt.TopicID
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if it != nil {
			resp.Topics = append(resp.Topics, withOps(b.metadataInternalTopic(it)))
			continue
		}
		if t == nil && rt.Topic != nil && allowCreate && b.cfg.AutoCreateTopics {
			if !a.MayCreate(name) {
				resp.Topics = append(resp.Topics, metadataTopicError(kmsg.MetadataRequestTopic{Topic: rt.Topic}, kerr.TopicAuthorizationFailed.Code))
				continue
			}
			if _, err := b.autoCreate(name); err != nil {
				code, _ := b.errCode(err)
				if code == kerr.InvalidTopicException.Code || code == kerr.UnknownTopicOrPartition.Code {
					b.log.Debug("metadata for a topic that cannot be auto-created", "topic", name, "err", err)
				} else {
					b.log.Warn("auto-creating topic failed", "topic", name, "err", err)
				}
				resp.Topics = append(resp.Topics, metadataTopicError(rt, code))
				continue
			}
			// As Apache's AutoTopicCreationManager (KRaft): the request
			// that creates the topic is answered UNKNOWN_TOPIC_OR_PARTITION
			// with no partitions and no id; the client asks again.
			resp.Topics = append(resp.Topics, metadataTopicError(rt, kerr.UnknownTopicOrPartition.Code))
			continue
		}
		if t == nil {
			code := kerr.UnknownTopicOrPartition.Code
			if rt.Topic == nil {
				code = kerr.UnknownTopicID.Code
			} else if topics.ValidateName(name) != nil {
				code = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, metadataTopicError(rt, code))
			continue
		}
		resp.Topics = append(resp.Topics, withOps(b.metadataTopic(t)))
	}
	return resp
}

func metadataTopicError(rt kmsg.MetadataRequestTopic, code int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, code
	return mt
}

func (b *Broker) metadataTopic(t *topic) kmsg.MetadataResponseTopic {
	return b.metadataTopicOf(t.meta.Name, t.meta.ID, int32(len(t.parts)), false)
}

// metadataInternalTopic is an internal topic as Apache shows it.
func (b *Broker) metadataInternalTopic(it *internalTopic) kmsg.MetadataResponseTopic {
	return b.metadataTopicOf(it.name, it.id, it.partitions, true)
}

func (b *Broker) metadataTopicOf(name string, id topicstore.UUID, partitions int32, internal bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = &name
	mt.TopicID = id
	mt.IsInternal = internal
	for p := int32(0); p < partitions; p++ {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		leader, epoch, ok := b.partitionOwner(name, p)
		if internal && b.cluster == nil {
			leader, epoch, ok = b.cfg.BrokerID, 0, true
		}
		if !ok {
			// Between owners (the previous one's key is gone, the next
			// has not claimed it yet): clients retry, as with Apache.
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mp.Leader, mp.LeaderEpoch = leader, epoch
		mp.Replicas = []int32{leader}
		mp.ISR = []int32{leader}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

func failMetadata(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, metadataTopicError(rt, code))
	}
	return resp
}
