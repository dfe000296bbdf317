package broker

import (
	"kaas/state/consumergroup"
	"kaas/storage/topicstore"
)

// topicsImage is the topics as consumer groups see them (Apache's
// metadata image): a snapshot of the registry plus the internal topics,
// which KIP-848 regexes resolve like any other, as Apache's do.
type topicsImage struct {
	set     *topicSet
	version int64
}

// topicsImage takes a snapshot; safe from any goroutine (group actors
// call it).
func (b *Broker) topicsImage() consumergroup.TopicsImage {
	return topicsImage{set: b.topics.load(), version: b.topicsVersion.Load()}
}

func (t topicsImage) ByName(name string) (consumergroup.TopicID, int32, bool) {
	if it := internalByName(name); it != nil {
		return it.id, it.partitions, true
	}
	if tp := t.set.byName[name]; tp != nil {
		return tp.meta.ID, int32(len(tp.parts)), true
	}
	return consumergroup.TopicID{}, 0, false
}

func (t topicsImage) ByID(id consumergroup.TopicID) (string, bool) {
	if it := internalByID(topicstore.UUID(id)); it != nil {
		return it.name, true
	}
	if tp := t.set.byID[topicstore.UUID(id)]; tp != nil {
		return tp.meta.Name, true
	}
	return "", false
}

func (t topicsImage) Names() []string {
	out := make([]string, 0, len(t.set.byName)+len(internalTopics))
	for name := range t.set.byName {
		out = append(out, name)
	}
	for name := range internalTopics {
		out = append(out, name)
	}
	return out
}

func (t topicsImage) Version() int64 { return t.version }
