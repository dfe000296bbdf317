package offsetlog

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model"
)

// Offset is one committed (or staged) offset, as Apache's OffsetAndMetadata
// plus the sequence number of the record that carried it, which decides
// whether a transactional commit is newer than a plain one (Apache compares
// the records' log offsets the same way).
type Offset struct {
	Seq             uint64
	Offset          int64
	LeaderEpoch     int32 // -1: none
	Metadata        string
	CommitTimestamp int64 // ms
	ExpireTimestamp int64 // ms; -1: none (v2–v4 retention_time)
}

// Key versions, as Apache's GroupMetadataManager reads them: 0 and 1 are
// offset commits, 2 is group metadata.
const (
	offsetKeyVersion = 1
	groupKeyVersion  = 2
)

// OffsetRecord is the record committing o for group/tp.
func OffsetRecord(group string, tp model.TopicPartition, o Offset) Record {
	return Record{Key: offsetKey(group, tp), Value: offsetValue(o)}
}

// OffsetTombstone is the record deleting group's offset for tp.
func OffsetTombstone(group string, tp model.TopicPartition) Record {
	return Record{Key: offsetKey(group, tp)}
}

// GroupRecord is the record storing a group's metadata.
func GroupRecord(group string, v *kmsg.GroupMetadataValue) Record {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
}

// GroupTombstone is the record deleting a group's metadata.
func GroupTombstone(group string) Record {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return Record{Key: k.AppendTo(nil)}
}

func offsetKey(group string, tp model.TopicPartition) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: tp.Topic, Partition: tp.Partition}
	return k.AppendTo(nil)
}

// offsetValue encodes o as Apache does: value v3 (with leader epoch), or
// v1 when the commit carries an explicit expire timestamp.
func offsetValue(o Offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Offset, v.Metadata, v.CommitTimestamp = o.Offset, o.Metadata, o.CommitTimestamp
	if o.ExpireTimestamp >= 0 {
		v.Version, v.ExpireTimestamp = 1, o.ExpireTimestamp
	} else {
		v.Version, v.LeaderEpoch = 3, o.LeaderEpoch
	}
	return v.AppendTo(nil)
}

// decodedKey is an offset key (group, tp), a group metadata key (group),
// or a consumer group record's key (its version; consumer_records.go).
type decodedKey struct {
	group    string
	isGroup  bool
	tp       model.TopicPartition
	consumer int16
}

func decodeKey(b []byte) (decodedKey, error) {
	if len(b) < 2 {
		return decodedKey{}, fmt.Errorf("record key of %d bytes", len(b))
	}
	switch v := int16(binary.BigEndian.Uint16(b)); v {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(b); err != nil {
			return decodedKey{}, fmt.Errorf("offset key: %w", err)
		}
		return decodedKey{group: k.Group, tp: model.TopicPartition{Topic: k.Topic, Partition: k.Partition}}, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(b); err != nil {
			return decodedKey{}, fmt.Errorf("group key: %w", err)
		}
		return decodedKey{group: k.Group, isGroup: true}, nil
	default:
		if isConsumerKey(v) {
			return decodedKey{consumer: v}, nil
		}
		return decodedKey{}, fmt.Errorf("unknown key version %d", v)
	}
}

func decodeOffset(b []byte, seq uint64) (Offset, error) {
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(b); err != nil {
		return Offset{}, fmt.Errorf("offset value: %w", err)
	}
	o := Offset{Seq: seq, Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTimestamp: v.CommitTimestamp, ExpireTimestamp: -1}
	if v.Version >= 3 {
		o.LeaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 {
		o.ExpireTimestamp = v.ExpireTimestamp
	}
	return o, nil
}

func decodeGroup(b []byte) (*kmsg.GroupMetadataValue, error) {
	// kmsg aliases byte fields into its input: copy, so a decoded value
	// never pins a whole recovery buffer.
	v := new(kmsg.GroupMetadataValue)
	if err := v.ReadFrom(append([]byte(nil), b...)); err != nil {
		return nil, fmt.Errorf("group metadata value: %w", err)
	}
	return v, nil
}
