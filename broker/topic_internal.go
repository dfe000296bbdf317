package broker

// Apache's internal topics, as kaas shows them.
//
// __consumer_offsets and __transaction_state are where Apache keeps group
// and transaction coordinator state; kaas keeps the same state in its slot
// logs (<data>/__cluster/offsets and .../txn_state, 50 slots each, hashed
// like the partitions). Clients still expect the topics: Metadata lists
// them (is_internal true, 50 partitions led by this broker), kcat -L and
// kadm show them, a regex consumer skips them unless it asks, and KIP-848
// regex subscriptions resolve them like any topic, as Apache does.
//
// They are views, not logs. Produce to them is refused with
// INVALID_TOPIC_EXCEPTION ("Cannot append to internal topic", Apache's
// ReplicaManager), AddPartitionsToTxn with TOPIC_AUTHORIZATION_FAILED (as
// Apache, which never authorizes clients to write them). Fetch and
// ListOffsets on __consumer_offsets read its slots' records as Apache's
// log would hold them (topic_consumer_offsets.go); __transaction_state
// answers every partition as empty (log start = high watermark = 0): its
// slot logs are not Apache's records (`kaas inspect` and /api/actors show
// them). CreateTopics answers
// TOPIC_ALREADY_EXISTS; deleting them or adding partitions is refused
// with INVALID_REQUEST (Apache would let an admin delete them and lose
// every group, kaas cannot: the slot logs are not the topic).

import (
	"crypto/sha256"
	"sort"
	"strings"

	"kaas/model/slots"
	"kaas/storage/topicstore"
)

const (
	consumerOffsetsTopic  = "__consumer_offsets"
	transactionStateTopic = "__transaction_state"
)

// internalTopic is one internal topic.
type internalTopic struct {
	name       string
	id         topicstore.UUID
	partitions int32
}

// internalTopics are the two topics, with ids derived from their names so
// they are the same on every broker and across restarts (Apache gives
// them a random id when it creates them).
var internalTopics = func() map[string]*internalTopic {
	out := map[string]*internalTopic{}
	for _, name := range []string{consumerOffsetsTopic, transactionStateTopic} {
		sum := sha256.Sum256([]byte("kaas internal topic " + name))
		var id topicstore.UUID
		copy(id[:], sum[:16])
		id[6] = id[6]&0x0f | 0x40 // a v4 UUID, as Kafka's are
		id[8] = id[8]&0x3f | 0x80
		out[name] = &internalTopic{name: name, id: id, partitions: slots.Count}
	}
	return out
}()

// internalByName returns the internal topic called name, or nil.
func internalByName(name string) *internalTopic { return internalTopics[name] }

// internalByID returns the internal topic with id, or nil.
func internalByID(id topicstore.UUID) *internalTopic {
	for _, t := range internalTopics {
		if t.id == id {
			return t
		}
	}
	return nil
}

// sortedInternalTopics lists the internal topics by name.
func sortedInternalTopics() []*internalTopic {
	out := make([]*internalTopic, 0, len(internalTopics))
	for _, t := range internalTopics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// hasPartition reports whether p is one of the topic's partitions.
func (t *internalTopic) hasPartition(p int32) bool { return p >= 0 && p < t.partitions }

// collidingInternal returns the internal topic whose name differs from
// name only by '.' versus '_', or "".
func collidingInternal(name string) string {
	norm := strings.ReplaceAll(name, ".", "_")
	for other := range internalTopics {
		if other != name && strings.ReplaceAll(other, ".", "_") == norm {
			return other
		}
	}
	return ""
}

// internalFor resolves a request's topic reference — by name when it has
// one, else by id — to an internal topic, or nil.
func internalFor(name *string, id [16]byte) *internalTopic {
	if name != nil {
		return internalByName(*name)
	}
	return internalByID(topicstore.UUID(id))
}
