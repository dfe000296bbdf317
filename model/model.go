// Package model holds the names every layer shares, as redpanda's model:
// what identifies a partition, by topic name or by topic id. It is the
// bottom layer and imports nothing of kaas, so storage formats, state
// machines, actor messages and handlers all speak of a partition with
// one type instead of converting between look-alikes.
package model

// TopicPartition names one partition by its topic's name: a group's
// committed offset, a transaction's partition, a produce target. The JSON
// names are the transaction log's record format (storage/txnlog), which
// stores a transaction's partitions with them; do not change them.
type TopicPartition struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
}

// TopicID is a topic's id (KIP-516), as the wire carries it.
type TopicID = [16]byte

// TopicIDPartition names one partition by its topic's id, as share groups
// (KIP-932) and Apache's TopicIdPartition do.
type TopicIDPartition struct {
	Topic     TopicID
	Partition int32
}
