// Package sharefetch builds the raw ShareFetch requests (KIP-932) that
// tests send by hand, where franz-go's share consumer would hide what
// they check (a member holding records without acknowledging them, bad
// session epochs, acknowledgements of records never acquired). It
// imports nothing of kaas, so the broker package's own tests can use it
// as well as brokertest's users.
package sharefetch

import "github.com/twmb/franz-go/pkg/kmsg"

// Request is a ShareFetch by member of group, at share session epoch,
// of one partition of the topic with id topic: up to maxRecords records
// (also the batch size asked for), waiting up to waitMillis for at least
// one byte, up to 1 MiB. Its one partition is Topics[0].Partitions[0]:
// a caller piggybacks acknowledgements there, and sets
// ShareAcquireMode on the request (0, batch_optimized, by default).
func Request(group, member string, epoch int32, topic [16]byte, partition, waitMillis, maxRecords int32) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = waitMillis, 1, 1<<20
	req.MaxRecords, req.BatchSize = maxRecords, maxRecords
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topic
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.Partition = partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
