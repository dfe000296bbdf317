package broker

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/partition"
	"kaas/coord"
	"kaas/state/topics"
	"kaas/storage/diskcheck"
	"kaas/storage/partlog"
	"kaas/storage/topicstore"
)

// topicStore is where topic metadata lives: files on the volume
// (topicstore.Store) for one broker, etcd (coord.TopicStore) in a cluster.
type topicStore interface {
	Save(topicstore.Topic) error
	Delete(name string) error
	Load() ([]topicstore.Topic, error)
}

// topic is a live topic: its metadata and its partition actors.
type topic struct {
	meta     topicstore.Topic
	resolved topics.Resolved
	parts    []*partition.Handle
}

// topicSet is an immutable snapshot of all topics; writers replace it
// whole, so the produce and fetch paths read it without locks.
type topicSet struct {
	byName map[string]*topic
	byID   map[topicstore.UUID]*topic
}

type topicRegistry struct{ p atomic.Pointer[topicSet] }

func (r *topicRegistry) load() *topicSet {
	if s := r.p.Load(); s != nil {
		return s
	}
	return &topicSet{byName: map[string]*topic{}, byID: map[topicstore.UUID]*topic{}}
}

// with returns a copy of the set with t added or replaced (nil meta name
// removal is done by without).
func (s *topicSet) with(t *topic) *topicSet {
	n := &topicSet{byName: maps.Clone(s.byName), byID: maps.Clone(s.byID)}
	n.byName[t.meta.Name] = t
	n.byID[t.meta.ID] = t
	return n
}

func (s *topicSet) without(name string) *topicSet {
	n := &topicSet{byName: maps.Clone(s.byName), byID: maps.Clone(s.byID)}
	if t, ok := n.byName[name]; ok {
		delete(n.byID, t.meta.ID)
		delete(n.byName, name)
	}
	return n
}

// partition returns the handle for topic/partition, or nil.
func (b *Broker) partition(name string, p int32) *partition.Handle {
	t := b.topics.load().byName[name]
	if t == nil || p < 0 || int(p) >= len(t.parts) {
		return nil
	}
	return t.parts[p]
}

// leadPartition returns the handle of a partition this broker leads, or
// nil and the error for the client: UNKNOWN_TOPIC_OR_PARTITION, or
// NOT_LEADER_OR_FOLLOWER when a peer broker leads it (cluster mode).
func (b *Broker) leadPartition(name string, p int32) (*partition.Handle, int16) {
	t := b.topics.load().byName[name]
	if t == nil || p < 0 || int(p) >= len(t.parts) {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	if t.parts[p] == nil {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return t.parts[p], 0
}

// leaderView is the read view of a partition this broker leads at the
// request's CurrentLeaderEpoch (-1: any), or the error to answer:
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
// UNKNOWN_LEADER_EPOCH, or KAFKA_STORAGE_ERROR for a partition offline
// after a disk error.
func (b *Broker) leaderView(name string, p, currentEpoch int32) (*partlog.View, int16) {
	h, code := b.leadPartition(name, p)
	if h == nil {
		return nil, code
	}
	if code := b.leaderEpochCode(name, p, currentEpoch); code != 0 {
		return nil, code
	}
	v := h.View()
	if v.Offline != nil {
		return nil, kerr.KafkaStorageError.Code
	}
	return v, 0
}

// partitionExists reports whether topic/partition exists, wherever it is
// led, counting the internal topics' partitions (groups may commit
// offsets for them).
func (b *Broker) partitionExists(name string, p int32) bool {
	if it := internalByName(name); it != nil {
		return it.hasPartition(p)
	}
	t := b.topics.load().byName[name]
	return t != nil && p >= 0 && int(p) < len(t.parts)
}

func (b *Broker) partitionConfig(t *topic, p int32) partition.Config {
	var verifier partition.TxnVerifier
	if b.cfg.TxnPartitionVerification {
		verifier = txnVerifier{b}
	}
	return partition.Config{
		Topic:                t.meta.Name,
		Partition:            p,
		TopicID:              t.meta.ID,
		Dir:                  filepath.Join(b.cfg.DataDir, fmt.Sprintf("%s-%d", t.meta.Name, p)),
		Log:                  partlog.Config(t.resolved.Log),
		MaxMessageBytes:      t.resolved.MaxMessageBytes,
		LogAppendTime:        t.resolved.LogAppendTime,
		MinInsyncReplicas:    t.resolved.MinInsyncReplicas,
		FlushInterval:        b.cfg.FlushInterval,
		ProducerIDExpiration: b.cfg.ProducerIDExpiration,
		TickInterval:         b.cfg.RetentionCheckInterval,
		CheckpointInterval:   time.Minute, // log.flush.offset.checkpoint.interval.ms
		Floors:               b.floors,
		Logger:               b.log,
		Observer:             partitionObserver{b.metrics},
		Events:               b.metrics.Events,
		Verifier:             verifier,
		Env:                  b.env,
		Gate:                 b.partitionGate(t.meta.Name, p),
		TakeOver:             b.cluster != nil,
		Cleaner:              b.cleaner,
	}
}

// loadTopics opens every persisted topic at start-up.
func (b *Broker) loadTopics() error {
	metas, err := b.topicStore.Load()
	if err != nil {
		return fmt.Errorf("loading topic metadata: %w", err)
	}
	set := b.topics.load()
	for _, m := range metas {
		t := &topic{meta: m, resolved: topics.Resolve(m.Configs, b.topicDefaults())}
		if err := b.openPartitions(t, 0, m.Partitions); err != nil {
			return err
		}
		set = set.with(t)
	}
	b.topics.p.Store(set)
	return nil
}

// openPartitions opens partitions [from, to). In cluster mode it opens
// none: the ownership loop opens each one this broker comes to own.
func (b *Broker) openPartitions(t *topic, from, to int32) error {
	if b.cluster != nil {
		for p := from; p < to; p++ {
			t.parts = append(t.parts, nil)
		}
		return nil
	}
	opened := make([]*partition.Handle, to-from)
	errs := make([]error, to-from)
	// Opening a partition is mostly waiting for fsyncs (its directory,
	// indexes, producer snapshot), each partition's its own files: opened
	// a few at a time they share the file system's journal commits, which
	// a thousand partitions opened one after another did not (about 14 ms
	// each under load here, so 10,000 outlasted a client's request
	// timeout).
	var next atomic.Int32
	var wg sync.WaitGroup
	for range min(int(to-from), openPartitionsAtOnce) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < to-from; i = next.Add(1) - 1 {
				opened[i], errs[i] = partition.Open(b.sys, b.partitionConfig(t, from+i))
			}
		}()
	}
	wg.Wait()
	b.heapRelease.opened()
	// On failure t.parts holds the partitions that did open, in order,
	// for the caller to stop, and the first failure is returned.
	var first error
	for i, h := range opened {
		if h != nil {
			t.parts = append(t.parts, h)
		}
		if first == nil {
			first = errs[i]
		}
	}
	return first
}

// abandonPartitions undoes a failed openPartitions(t, from, to): it stops
// the partitions that did open and removes the directories of all of
// them (a partition that failed half-way may have made its own).
func (b *Broker) abandonPartitions(t *topic, from, to int32) {
	for _, p := range t.parts[from:] {
		if p != nil {
			p.Stop(true)
		}
	}
	t.parts = t.parts[:from]
	for p := from; p < to; p++ {
		if err := b.env.FS.RemoveAll(b.partitionConfig(t, p).Dir); err != nil {
			b.log.Warn("could not remove the directory of a partition that failed to open", "topic", t.meta.Name, "partition", p, "err", err)
		}
	}
}

// openPartitionsAtOnce bounds the partitions opened concurrently.
const openPartitionsAtOnce = 16

// maxPartitionsPerRequest bounds the partitions one request may create,
// as Apache's controller bounds the records of one operation (10,000):
// each partition is an actor, a directory and open files, and a client
// asking for a billion must not take the broker down.
const maxPartitionsPerRequest = 10_000

var errTooManyPartitions = &topicError{kerr.PolicyViolation.Code, "Excessively large number of partitions per request."}

// topicError is a Kafka error code with the message that explains it.
type topicError struct {
	code int16
	msg  string
}

func (e *topicError) Error() string { return e.msg }

// errCode maps an error to the code and message a client gets. An error
// that is not a *topicError (a failed disk write, say) is logged here and
// answered UNKNOWN_SERVER_ERROR with a message that carries no server
// path or OS detail: those stay in the broker's log.
func (b *Broker) errCode(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	var te *topicError
	if errors.As(err, &te) {
		return te.code, &te.msg
	}
	b.log.Error("request failed on the broker", "err", err)
	msg := "the broker failed to carry out the request (the broker's log has the details)"
	return kerr.UnknownServerError.Code, &msg
}

// createTopic validates, persists and opens a topic. validateOnly stops
// after validation (CreateTopics validate_only).
func (b *Broker) createTopic(name string, partitions int32, replication int16, configs map[string]string, validateOnly bool) (*topic, error) {
	if err := topics.ValidateName(name); err != nil {
		return nil, &topicError{kerr.InvalidTopicException.Code, err.Error()}
	}
	if partitions == -1 {
		partitions = b.cfg.DefaultPartitions
	}
	if partitions <= 0 {
		return nil, &topicError{kerr.InvalidPartitions.Code, "number of partitions must be larger than 0"}
	}
	if partitions > maxPartitionsPerRequest {
		return nil, errTooManyPartitions
	}
	if replication == 0 || replication < -1 {
		return nil, &topicError{kerr.InvalidReplicationFactor.Code, "replication factor must be larger than 0, or -1 to use the default"}
	}
	if replication > 1 {
		return nil, &topicError{kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor: %d larger than available brokers: 1", replication)}
	}
	if err := topics.ValidateConfigs(configs, b.cfg.InternalTopicConfigs); err != nil {
		return nil, &topicError{kerr.InvalidConfig.Code, err.Error()}
	}
	if internalByName(name) != nil {
		return nil, &topicError{kerr.TopicAlreadyExists.Code, fmt.Sprintf("Topic '%s' already exists.", name)}
	}
	if other := collidingInternal(name); other != "" {
		return nil, &topicError{kerr.InvalidTopicException.Code, fmt.Sprintf("Topic '%s' collides with existing topic: %s", name, other)}
	}
	b.lockTopics()
	defer b.topicsMu.Unlock()
	if _, exists := b.topics.load().byName[name]; exists {
		return nil, &topicError{kerr.TopicAlreadyExists.Code, fmt.Sprintf("Topic '%s' already exists.", name)}
	}
	if other := b.collidingTopic(name); other != "" {
		return nil, &topicError{kerr.InvalidTopicException.Code, fmt.Sprintf("Topic '%s' collides with existing topic: %s", name, other)}
	}
	if validateOnly {
		return &topic{meta: topicstore.Topic{Name: name, Partitions: partitions, Configs: topics.CanonicalConfigs(configs)}}, nil
	}
	meta := topicstore.Topic{Name: name, ID: topicstore.NewUUID(), Partitions: partitions, Configs: topics.CanonicalConfigs(configs)}
	if cs, ok := b.topicStore.(*coord.TopicStore); ok {
		// Another broker may be creating the same name right now: etcd
		// lets exactly one of us.
		if err := cs.Create(meta); errors.Is(err, coord.ErrTopicExists) {
			return nil, &topicError{kerr.TopicAlreadyExists.Code, fmt.Sprintf("Topic '%s' already exists.", name)}
		} else if err != nil {
			return nil, fmt.Errorf("persisting topic %s: %w", name, err)
		}
	} else if err := b.topicStore.Save(meta); err != nil {
		return nil, fmt.Errorf("persisting topic %s: %w", name, err)
	}
	t := &topic{meta: meta, resolved: topics.Resolve(meta.Configs, b.topicDefaults())}
	if err := b.openPartitions(t, 0, partitions); err != nil {
		b.abandonPartitions(t, 0, partitions)
		_ = b.topicStore.Delete(name)
		return nil, fmt.Errorf("opening topic %s: %w", name, err)
	}
	b.topics.p.Store(b.topics.load().with(t))
	b.log.Info("created topic", "topic", name, "partitions", partitions, "id", meta.ID.String())
	b.notifyTopicsChanged(true)
	return t, nil
}

// collidingTopic returns an existing topic whose name differs from name
// only by '.' versus '_' (Apache's Topic.hasCollision: both map to the
// same metric names), or "".
func (b *Broker) collidingTopic(name string) string {
	norm := strings.ReplaceAll(name, ".", "_")
	for other := range b.topics.load().byName {
		if strings.ReplaceAll(other, ".", "_") == norm {
			return other
		}
	}
	return ""
}

// autoCreate creates a topic with the broker defaults if auto-creation is
// on, tolerating a concurrent creation of the same topic.
func (b *Broker) autoCreate(name string) (*topic, error) {
	if !b.cfg.AutoCreateTopics {
		return nil, &topicError{kerr.UnknownTopicOrPartition.Code, "unknown topic and auto-creation is off"}
	}
	t, err := b.createTopic(name, b.cfg.DefaultPartitions, -1, nil, false)
	var te *topicError
	if errors.As(err, &te) && te.code == kerr.TopicAlreadyExists.Code {
		if t := b.topics.load().byName[name]; t != nil {
			return t, nil
		}
	}
	return t, err
}

// errInternalTopic refuses to delete, grow or reconfigure an internal
// topic: it is a view of the slot logs (topic_internal.go).
func errInternalTopic(name string) error {
	return &topicError{kerr.InvalidRequest.Code, fmt.Sprintf("Topic '%s' is internal: kaas keeps its contents in its own slot logs and it cannot be changed.", name)}
}

// deleteTopic stops a topic's partitions and removes its data.
func (b *Broker) deleteTopic(name string) error {
	if internalByName(name) != nil {
		return errInternalTopic(name)
	}
	b.lockTopics()
	defer b.topicsMu.Unlock()
	t := b.topics.load().byName[name]
	if t == nil {
		return &topicError{kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %s does not exist", name)}
	}
	if err := b.topicStore.Delete(name); err != nil {
		return fmt.Errorf("deleting topic %s metadata: %w", name, err)
	}
	b.topics.p.Store(b.topics.load().without(name))
	for _, p := range t.parts {
		if p != nil {
			p.Stop(true)
		}
	}
	b.log.Info("deleted topic", "topic", name)
	b.forgetTopicOffsets(name, int32(len(t.parts)))
	b.notifyTopicsChanged(false)
	return nil
}

// growTopic adds partitions (CreatePartitions).
func (b *Broker) growTopic(name string, count int32, validateOnly bool) error {
	if internalByName(name) != nil {
		return errInternalTopic(name)
	}
	b.lockTopics()
	defer b.topicsMu.Unlock()
	t := b.topics.load().byName[name]
	if t == nil {
		return &topicError{kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %s does not exist", name)}
	}
	have := int32(len(t.parts))
	if count < have {
		return &topicError{kerr.InvalidPartitions.Code, fmt.Sprintf("topic currently has %d partitions, which is higher than the requested %d", have, count)}
	}
	if count == have {
		return &topicError{kerr.InvalidPartitions.Code, fmt.Sprintf("topic already has %d partitions", have)}
	}
	if count-have > maxPartitionsPerRequest {
		return errTooManyPartitions
	}
	if validateOnly {
		return nil
	}
	grown := &topic{meta: t.meta, resolved: t.resolved, parts: append([]*partition.Handle(nil), t.parts...)}
	grown.meta.Partitions = count
	if err := b.topicStore.Save(grown.meta); err != nil {
		return fmt.Errorf("persisting topic %s: %w", name, err)
	}
	if err := b.openPartitions(grown, have, count); err != nil {
		// All or nothing, as in Apache, whose controller commits a
		// topic's new partitions in one atomic batch of metadata records:
		// none of them is left running or on disk, and the old count is
		// what a restart finds.
		b.abandonPartitions(grown, have, count)
		if rerr := b.topicStore.Save(t.meta); rerr != nil {
			b.log.Error("could not restore a topic's partition count after failing to add partitions: a restart opens them", "topic", name, "partitions", count, "err", rerr)
		}
		return fmt.Errorf("adding partitions to topic %s: %w", name, err)
	}
	b.topics.p.Store(b.topics.load().with(grown))
	b.log.Info("added partitions", "topic", name, "partitions", count)
	b.notifyTopicsChanged(false)
	return nil
}

// alterTopicConfigs changes a topic's overrides to what modify makes of
// the current ones and pushes the resolved configuration to its
// partitions. As Apache's controller, the new configs are validated
// before the topic's existence is checked. modify runs under the topic
// lock, so concurrent changes to one topic cannot lose each other.
func (b *Broker) alterTopicConfigs(name string, validateOnly bool, modify func(current map[string]string) (map[string]string, error)) error {
	b.lockTopics()
	defer b.topicsMu.Unlock()
	t := b.topics.load().byName[name]
	var current map[string]string
	if t != nil {
		current = maps.Clone(t.meta.Configs)
	}
	configs, err := modify(current)
	if err != nil {
		return err
	}
	if err := topics.ValidateConfigs(configs, b.cfg.InternalTopicConfigs); err != nil {
		return &topicError{kerr.InvalidConfig.Code, err.Error()}
	}
	if internalByName(name) != nil {
		return errInternalTopic(name)
	}
	if t == nil {
		return &topicError{kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("The topic '%s' does not exist.", name)}
	}
	if validateOnly {
		return nil
	}
	altered := &topic{meta: t.meta, parts: t.parts}
	altered.meta.Configs = topics.CanonicalConfigs(configs)
	altered.resolved = topics.Resolve(altered.meta.Configs, b.topicDefaults())
	if err := b.topicStore.Save(altered.meta); err != nil {
		return fmt.Errorf("persisting topic %s: %w", name, err)
	}
	b.topics.p.Store(b.topics.load().with(altered))
	for _, p := range altered.parts {
		if p != nil {
			p.Send(updateConfigMessage(altered.resolved))
		}
	}
	b.log.Info("altered topic configs", "topic", name, "configs", altered.meta.Configs)
	return nil
}

// lockTopics takes topicsMu, which is held while topic metadata and
// partition directories are written and fsynced: only handlers off the
// event loop may wait for it (diskcheck says so in tests).
func (b *Broker) lockTopics() {
	diskcheck.Blocking("the topics lock, held while topic metadata is persisted:", "topicsMu")
	b.topicsMu.Lock()
}

// sortedTopics lists topics by name, for stable answers.
func sortedTopics(s *topicSet) []*topic {
	out := make([]*topic, 0, len(s.byName))
	for _, t := range s.byName {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].meta.Name < out[j].meta.Name })
	return out
}
