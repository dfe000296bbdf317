package offsetlog

// KIP-848 consumer groups in the slot log: Apache 4.0's record types, with
// Apache's key versions and schemas (group-coordinator's
// ConsumerGroup*Key/Value.json; values are flexible version 0, prefixed by
// the value version as Apache writes them), encoded here since kmsg has no
// types for them:
//
//	key v3  ConsumerGroupMetadata             group epoch
//	key v4  ConsumerGroupPartitionMetadata    subscription metadata
//	key v5  ConsumerGroupMemberMetadata       one member's subscription
//	key v6  ConsumerGroupTargetAssignmentMetadata  target assignment epoch
//	key v7  ConsumerGroupTargetAssignmentMember    one member's target
//	key v8  ConsumerGroupCurrentMemberAssignment   one member's epochs,
//	                                               state and partitions
//	key v16 ConsumerGroupRegularExpression    a resolved regex
//
// A nil value is a tombstone. Replay keeps the latest of each in the
// group's ConsumerState; a tombstone of the group epoch removes the whole
// consumer group (Apache deletes it once its records are all tombstoned,
// which the coordinator always writes together).

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Key versions of the consumer group records.
const (
	keyConsumerGroupMetadata     = 3
	keyConsumerPartitionMetadata = 4
	keyConsumerMemberMetadata    = 5
	keyConsumerTargetMetadata    = 6
	keyConsumerTargetMember      = 7
	keyConsumerCurrentAssignment = 8
	keyConsumerRegex             = 16
)

// TopicPartitions is one topic's partitions in an assignment.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// ConsumerTopic is one topic of a group's subscription metadata.
type ConsumerTopic struct {
	ID         [16]byte
	Name       string
	Partitions int32
}

// ConsumerMember is ConsumerGroupMemberMetadataValue.
type ConsumerMember struct {
	InstanceID           *string
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	RebalanceTimeoutMs   int32
	ServerAssignor       *string
	// Classic is set for a member that uses the classic protocol
	// (JoinGroup/SyncGroup) inside a consumer group: Apache's
	// ClassicMemberMetadata, tagged field 0.
	Classic *ClassicMember
}

// ClassicMember is ConsumerGroupMemberMetadataValue.ClassicMemberMetadata.
type ClassicMember struct {
	SessionTimeoutMs int32
	Protocols        []ClassicProtocol
}

// ClassicProtocol is one protocol a classic member supports, with its
// metadata (the consumer protocol subscription).
type ClassicProtocol struct {
	Name     string
	Metadata []byte
}

// ConsumerAssignment is ConsumerGroupCurrentMemberAssignmentValue.
type ConsumerAssignment struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            []TopicPartitions
	PendingRevocation   []TopicPartitions
}

// ConsumerRegex is ConsumerGroupRegularExpressionValue: the topics a
// regex resolved to, the metadata version it saw and when.
type ConsumerRegex struct {
	Topics      []string
	Version     int64
	TimestampMs int64
}

// ConsumerState is a KIP-848 consumer group as its records say. Values are
// never modified once decoded; replay replaces them.
type ConsumerState struct {
	Epoch       int32
	Topics      []ConsumerTopic
	Members     map[string]*ConsumerMember
	TargetEpoch int32
	Targets     map[string][]TopicPartitions
	Current     map[string]*ConsumerAssignment
	Regexes     map[string]*ConsumerRegex
}

func newConsumerState() *ConsumerState {
	return &ConsumerState{
		Members: map[string]*ConsumerMember{}, Targets: map[string][]TopicPartitions{},
		Current: map[string]*ConsumerAssignment{}, Regexes: map[string]*ConsumerRegex{},
	}
}

// clone copies the maps; the values are shared (never modified).
func (c *ConsumerState) clone() *ConsumerState {
	if c == nil {
		return nil
	}
	out := *c
	out.Members = make(map[string]*ConsumerMember, len(c.Members))
	for k, v := range c.Members {
		out.Members[k] = v
	}
	out.Targets = make(map[string][]TopicPartitions, len(c.Targets))
	for k, v := range c.Targets {
		out.Targets[k] = v
	}
	out.Current = make(map[string]*ConsumerAssignment, len(c.Current))
	for k, v := range c.Current {
		out.Current[k] = v
	}
	out.Regexes = make(map[string]*ConsumerRegex, len(c.Regexes))
	for k, v := range c.Regexes {
		out.Regexes[k] = v
	}
	return &out
}

// ConsumerEpochRecord stores the group epoch (nil: the group's tombstone).
func ConsumerEpochRecord(group string, epoch *int32) Record {
	r := Record{Key: consumerKey(keyConsumerGroupMetadata, group)}
	if epoch != nil {
		r.Value = kbin.AppendUvarint(kbin.AppendInt32(valueHeader(), *epoch), 0)
	}
	return r
}

// ConsumerSubscriptionRecord stores the subscription metadata (nil
// topics with tombstone set: its tombstone).
func ConsumerSubscriptionRecord(group string, topics []ConsumerTopic, tombstone bool) Record {
	r := Record{Key: consumerKey(keyConsumerPartitionMetadata, group)}
	if tombstone {
		return r
	}
	v := kbin.AppendCompactArrayLen(valueHeader(), len(topics))
	for _, t := range topics {
		v = kbin.AppendUuid(v, t.ID)
		v = kbin.AppendCompactString(v, t.Name)
		v = kbin.AppendInt32(v, t.Partitions)
		v = kbin.AppendCompactArrayLen(v, 0) // PartitionMetadata: racks, unused since 4.0
		v = kbin.AppendUvarint(v, 0)
	}
	r.Value = kbin.AppendUvarint(v, 0)
	return r
}

// ConsumerMemberRecord stores a member's subscription (nil: tombstone).
func ConsumerMemberRecord(group, member string, m *ConsumerMember) Record {
	r := Record{Key: consumerMemberKey(keyConsumerMemberMetadata, group, member)}
	if m == nil {
		return r
	}
	v := valueHeader()
	v = kbin.AppendCompactNullableString(v, m.InstanceID)
	v = kbin.AppendCompactNullableString(v, m.RackID)
	v = kbin.AppendCompactString(v, m.ClientID)
	v = kbin.AppendCompactString(v, m.ClientHost)
	v = kbin.AppendCompactArrayLen(v, len(m.SubscribedTopicNames))
	for _, t := range m.SubscribedTopicNames {
		v = kbin.AppendCompactString(v, t)
	}
	v = kbin.AppendCompactNullableString(v, m.SubscribedTopicRegex)
	v = kbin.AppendInt32(v, m.RebalanceTimeoutMs)
	v = kbin.AppendCompactNullableString(v, m.ServerAssignor)
	if m.Classic == nil {
		r.Value = kbin.AppendUvarint(v, 0)
		return r
	}
	// Tagged field 0: the classic member metadata.
	c := kbin.AppendInt32(nil, m.Classic.SessionTimeoutMs)
	c = kbin.AppendCompactArrayLen(c, len(m.Classic.Protocols))
	for _, p := range m.Classic.Protocols {
		c = kbin.AppendCompactString(c, p.Name)
		c = kbin.AppendCompactBytes(c, p.Metadata)
		c = kbin.AppendUvarint(c, 0)
	}
	c = kbin.AppendUvarint(c, 0)
	v = kbin.AppendUvarint(v, 1)
	v = kbin.AppendUvarint(v, 0)
	v = kbin.AppendUvarint(v, uint32(len(c)))
	r.Value = append(v, c...)
	return r
}

// ConsumerTargetEpochRecord stores the target assignment epoch (nil:
// tombstone).
func ConsumerTargetEpochRecord(group string, epoch *int32) Record {
	r := Record{Key: consumerKey(keyConsumerTargetMetadata, group)}
	if epoch != nil {
		r.Value = kbin.AppendUvarint(kbin.AppendInt32(valueHeader(), *epoch), 0)
	}
	return r
}

// ConsumerTargetRecord stores a member's target assignment (tombstone
// set: its tombstone).
func ConsumerTargetRecord(group, member string, tps []TopicPartitions, tombstone bool) Record {
	r := Record{Key: consumerMemberKey(keyConsumerTargetMember, group, member)}
	if !tombstone {
		r.Value = kbin.AppendUvarint(appendTopicPartitions(valueHeader(), tps), 0)
	}
	return r
}

// ConsumerAssignmentRecord stores a member's current assignment (nil:
// tombstone).
func ConsumerAssignmentRecord(group, member string, a *ConsumerAssignment) Record {
	r := Record{Key: consumerMemberKey(keyConsumerCurrentAssignment, group, member)}
	if a == nil {
		return r
	}
	v := valueHeader()
	v = kbin.AppendInt32(v, a.MemberEpoch)
	v = kbin.AppendInt32(v, a.PreviousMemberEpoch)
	v = kbin.AppendInt8(v, a.State)
	v = appendTopicPartitions(v, a.Assigned)
	v = appendTopicPartitions(v, a.PendingRevocation)
	r.Value = kbin.AppendUvarint(v, 0)
	return r
}

// ConsumerRegexRecord stores a resolved regex (nil: tombstone).
func ConsumerRegexRecord(group, regex string, re *ConsumerRegex) Record {
	r := Record{Key: consumerMemberKey(keyConsumerRegex, group, regex)}
	if re == nil {
		return r
	}
	v := kbin.AppendCompactArrayLen(valueHeader(), len(re.Topics))
	for _, t := range re.Topics {
		v = kbin.AppendCompactString(v, t)
	}
	v = kbin.AppendInt64(v, re.Version)
	v = kbin.AppendInt64(v, re.TimestampMs)
	r.Value = kbin.AppendUvarint(v, 0)
	return r
}

// ConsumerGroupTombstones are the records deleting every trace of a
// consumer group but its offsets, in Apache's order
// (ConsumerGroup.createGroupTombstoneRecords).
func ConsumerGroupTombstones(group string, c *ConsumerState) []Record {
	var out []Record
	for _, id := range sortedKeys(c.Current) {
		out = append(out, ConsumerAssignmentRecord(group, id, nil))
	}
	for _, id := range sortedKeys(c.Targets) {
		out = append(out, ConsumerTargetRecord(group, id, nil, true))
	}
	for _, id := range sortedKeys(c.Members) {
		out = append(out, ConsumerMemberRecord(group, id, nil))
	}
	for _, re := range sortedKeys(c.Regexes) {
		out = append(out, ConsumerRegexRecord(group, re, nil))
	}
	out = append(out, ConsumerTargetEpochRecord(group, nil), ConsumerSubscriptionRecord(group, nil, true), ConsumerEpochRecord(group, nil))
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// valueHeader starts a value: its version, 0 for every consumer record.
func valueHeader() []byte { return kbin.AppendInt16(nil, 0) }

func consumerKey(version int16, group string) []byte {
	return kbin.AppendString(kbin.AppendInt16(nil, version), group)
}

func consumerMemberKey(version int16, group, member string) []byte {
	return kbin.AppendString(consumerKey(version, group), member)
}

func appendTopicPartitions(dst []byte, tps []TopicPartitions) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(tps))
	for _, tp := range tps {
		dst = kbin.AppendUuid(dst, tp.TopicID)
		dst = kbin.AppendCompactArrayLen(dst, len(tp.Partitions))
		for _, p := range tp.Partitions {
			dst = kbin.AppendInt32(dst, p)
		}
		dst = kbin.AppendUvarint(dst, 0)
	}
	return dst
}

// consumerKeyOf decodes a consumer record's key: its version, group and
// (for per-member and regex records) the member id or regex.
func consumerKeyOf(version int16, b []byte) (group, sub string, err error) {
	r := kbin.Reader{Src: b[2:]}
	group = r.String()
	switch version {
	case keyConsumerMemberMetadata, keyConsumerTargetMember, keyConsumerCurrentAssignment, keyConsumerRegex:
		sub = r.String()
	}
	if err := r.Complete(); err != nil {
		return "", "", fmt.Errorf("consumer group key v%d: %w", version, err)
	}
	return group, sub, nil
}

// isConsumerKey reports whether a key version is a consumer record's.
func isConsumerKey(version int16) bool {
	switch version {
	case keyConsumerGroupMetadata, keyConsumerPartitionMetadata, keyConsumerMemberMetadata,
		keyConsumerTargetMetadata, keyConsumerTargetMember, keyConsumerCurrentAssignment, keyConsumerRegex:
		return true
	}
	return false
}

var errValueVersion = errors.New("unknown value version")

// applyConsumer replays one consumer record into the group's state.
func (s *State) applyConsumer(version int16, key, value []byte) error {
	group, sub, err := consumerKeyOf(version, key)
	if err != nil {
		return err
	}
	g := s.Groups[group]
	if value == nil {
		if g == nil || g.Consumer == nil {
			return nil
		}
		c := g.Consumer
		switch version {
		case keyConsumerGroupMetadata:
			g.Consumer = nil
			s.dropIfEmpty(group)
		case keyConsumerPartitionMetadata:
			c.Topics = nil
		case keyConsumerMemberMetadata:
			delete(c.Members, sub)
		case keyConsumerTargetMetadata:
			c.TargetEpoch = 0
		case keyConsumerTargetMember:
			delete(c.Targets, sub)
		case keyConsumerCurrentAssignment:
			delete(c.Current, sub)
		case keyConsumerRegex:
			delete(c.Regexes, sub)
		}
		return nil
	}
	r := kbin.Reader{Src: value}
	if v := r.Int16(); v != 0 {
		return fmt.Errorf("consumer group record key v%d value v%d: %w", version, v, errValueVersion)
	}
	g = s.group(group)
	if g.Consumer == nil {
		g.Consumer = newConsumerState()
	}
	c := g.Consumer
	switch version {
	case keyConsumerGroupMetadata:
		c.Epoch = r.Int32()
	case keyConsumerPartitionMetadata:
		n := r.CompactArrayLen()
		var topics []ConsumerTopic
		for i := int32(0); i < n && r.Ok(); i++ {
			t := ConsumerTopic{ID: r.Uuid(), Name: r.CompactString(), Partitions: r.Int32()}
			for j, racks := int32(0), r.CompactArrayLen(); j < racks && r.Ok(); j++ {
				r.Int32()
				for k, m := int32(0), r.CompactArrayLen(); k < m && r.Ok(); k++ {
					r.CompactString()
				}
				skipTags(&r)
			}
			skipTags(&r)
			topics = append(topics, t)
		}
		c.Topics = topics
	case keyConsumerMemberMetadata:
		m := &ConsumerMember{InstanceID: r.CompactNullableString(), RackID: r.CompactNullableString(), ClientID: r.CompactString(), ClientHost: r.CompactString()}
		n := r.CompactArrayLen()
		for i := int32(0); i < n && r.Ok(); i++ {
			m.SubscribedTopicNames = append(m.SubscribedTopicNames, r.CompactString())
		}
		m.SubscribedTopicRegex = r.CompactNullableString()
		m.RebalanceTimeoutMs = r.Int32()
		m.ServerAssignor = r.CompactNullableString()
		classic, err := readClassicTag(&r)
		if err != nil {
			return fmt.Errorf("consumer group record key v%d value: %w", version, err)
		}
		m.Classic = classic
		c.Members[sub] = m
		if err := r.Complete(); err != nil {
			return fmt.Errorf("consumer group record key v%d value: %w", version, err)
		}
		return nil
	case keyConsumerTargetMetadata:
		c.TargetEpoch = r.Int32()
	case keyConsumerTargetMember:
		c.Targets[sub] = readTopicPartitions(&r)
	case keyConsumerCurrentAssignment:
		a := &ConsumerAssignment{MemberEpoch: r.Int32(), PreviousMemberEpoch: r.Int32(), State: r.Int8()}
		a.Assigned = readTopicPartitions(&r)
		a.PendingRevocation = readTopicPartitions(&r)
		c.Current[sub] = a
	case keyConsumerRegex:
		re := &ConsumerRegex{}
		n := r.CompactArrayLen()
		for i := int32(0); i < n && r.Ok(); i++ {
			re.Topics = append(re.Topics, r.CompactString())
		}
		re.Version, re.TimestampMs = r.Int64(), r.Int64()
		c.Regexes[sub] = re
	}
	skipTags(&r)
	if err := r.Complete(); err != nil {
		return fmt.Errorf("consumer group record key v%d value: %w", version, err)
	}
	return nil
}

func readTopicPartitions(r *kbin.Reader) []TopicPartitions {
	n := r.CompactArrayLen()
	var out []TopicPartitions
	for i := int32(0); i < n && r.Ok(); i++ {
		tp := TopicPartitions{TopicID: r.Uuid()}
		m := r.CompactArrayLen()
		if m > 0 && int(m) <= len(r.Src)/4 {
			tp.Partitions = make([]int32, 0, m)
		}
		for j := int32(0); j < m && r.Ok(); j++ {
			tp.Partitions = append(tp.Partitions, r.Int32())
		}
		skipTags(r)
		out = append(out, tp)
	}
	return out
}

// readClassicTag reads the member metadata's tagged fields: tag 0 is the
// classic member metadata, others are skipped.
func readClassicTag(r *kbin.Reader) (*ClassicMember, error) {
	var out *ClassicMember
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag, size := r.Uvarint(), r.Uvarint()
		b := r.Span(int(size))
		if tag != 0 {
			continue
		}
		cr := kbin.Reader{Src: b}
		c := &ClassicMember{SessionTimeoutMs: cr.Int32()}
		for i, np := int32(0), cr.CompactArrayLen(); i < np && cr.Ok(); i++ {
			c.Protocols = append(c.Protocols, ClassicProtocol{Name: cr.CompactString(), Metadata: bytes.Clone(cr.CompactBytes())})
			skipTags(&cr)
		}
		skipTags(&cr)
		if err := cr.Complete(); err != nil {
			return nil, fmt.Errorf("classic member metadata: %w", err)
		}
		out = c
	}
	return out, nil
}

// skipTags skips a flexible struct's tagged fields (none are written, and
// those of later versions are ignored, as Apache ignores unknown tags).
func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}
