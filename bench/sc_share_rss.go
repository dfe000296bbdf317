package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// share-rss: the memory a broker needs to hold 100 k share records
// acquired and not acknowledged (issue 25). Apache bounds the records in
// flight per share-partition by group.share.partition.max.record.locks
// (default 2000, at most 10,000), so 100 k in flight is 10 partitions at
// 10,000 each: both children start with that broker config raised to
// 10,000 (kaas through its config field, kfake through BrokerConfigs).
//
// Both brokers run as child processes of the bench (as in the rss
// scenario), so each side's figure is the same thing: the child's VmHWM
// and VmRSS from /proc, with nothing of the bench's clients in it.
func init() {
	register(&Scenario{
		Name: "share-rss",
		About: "peak resident memory (VmHWM) of a broker child process holding 100 k share records (10 partitions × 10,000 locks) " +
			"acquired by one member and never acknowledged (raw ShareFetch: franz-go's share consumer accepts on its next poll)",
		Headline: "MiB", Latency: "share fetch",
		NoTarget: true,
		Sides:    []string{"kaas", "kfake"},
		Params: func(o *Options) string {
			return fmt.Sprintf("%d B records, %d partitions × %d record locks, 1 share member, no acks",
				o.RecordSize, shareRSSPartitions, shareRSSLocks)
		},
		Run: shareRSS,
	})
}

const (
	shareRSSPartitions = 10
	shareRSSLocks      = 10_000 // Apache's upper bound for the broker config
	// shareLocksEnv carries group.share.partition.max.record.locks to a
	// broker child.
	shareLocksEnv = "KAAS_BENCH_SHARE_LOCKS"
)

// shareLocksFromEnv is the record-lock bound a broker child was asked for
// (0: the default).
func shareLocksFromEnv() int {
	n, _ := strconv.Atoi(os.Getenv(shareLocksEnv))
	return n
}

func shareRSS(ctx context.Context, e *Env) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("share-rss reads /proc: linux only")
	}
	pid, stop, err := startBrokerChild(e, fmt.Sprintf("%s=%d", shareLocksEnv, shareRSSLocks))
	if err != nil {
		return err
	}
	defer stop()
	base, err := procMiB(pid, "VmRSS:")
	if err != nil {
		return err
	}
	want := shareRSSPartitions * shareRSSLocks
	topic := uniqueTopic("bench-share-rss")
	if err := e.createTopic(ctx, topic, shareRSSPartitions); err != nil {
		return err
	}
	if err := e.fillSpread(ctx, topic, want, e.Opts.RecordSize, shareRSSPartitions); err != nil {
		return err
	}
	filled, err := procMiB(pid, "VmRSS:")
	if err != nil {
		return err
	}
	cl, err := e.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	group := uniqueTopic("bench-share-rss-group")
	var start kadm.Offsets
	for p := range int32(shareRSSPartitions) {
		start.AddOffset(topic, p, 0, -1)
	}
	if _, err := adm.AlterShareGroupOffsets(ctx, group, start); err != nil {
		return fmt.Errorf("starting the share group at offset 0: %w", err)
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	topicID := md.Topics[topic].ID
	member, err := joinShareGroup(ctx, e, cl, group, topic)
	if err != nil {
		return err
	}
	e.Begin()
	got, err := acquireWithoutAck(ctx, e, cl, group, member, topicID, want)
	if err != nil {
		return err
	}
	e.EndMeasuring()
	rss, err := procMiB(pid, "VmRSS:")
	if err != nil {
		return err
	}
	hwm, err := procMiB(pid, "VmHWM:")
	if err != nil {
		return err
	}
	e.SetValue(hwm, "peak RSS MiB")
	e.Note("%d records acquired, none acknowledged; VmRSS %.1f MiB at start, %.1f after the fill, %.1f with them in flight (+%.1f); VmHWM %.1f",
		got, base, filled, rss, rss-filled, hwm)
	return nil
}

// joinShareGroup joins group as a new member subscribed to topic and
// heartbeats until every partition of it is assigned to the member.
func joinShareGroup(ctx context.Context, e *Env, cl kmsg.Requestor, group, topic string) (string, error) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	member := base64.RawURLEncoding.EncodeToString(id[:])
	epoch := int32(0)
	deadline := time.Now().Add(e.Opts.SetupTimeout)
	for {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
		req.SubscribedTopicNames = []string{topic}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return "", fmt.Errorf("share group heartbeat: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return "", fmt.Errorf("share group heartbeat: %w", err)
		}
		epoch = resp.MemberEpoch
		if a := resp.Assignment; a != nil {
			n := 0
			for _, tp := range a.TopicPartitions {
				n += len(tp.Partitions)
			}
			if n == shareRSSPartitions {
				return member, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("share member not assigned all %d partitions within %v", shareRSSPartitions, e.Opts.SetupTimeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// acquireWithoutAck runs one share session fetching from every partition,
// never acknowledging, until want records are acquired.
func acquireWithoutAck(ctx context.Context, e *Env, cl kmsg.Requestor, group, member string, topicID [16]byte, want int) (int, error) {
	got := 0
	deadline := time.Now().Add(e.Opts.SetupTimeout)
	for epoch := int32(0); got < want; epoch++ {
		if time.Now().After(deadline) {
			return got, fmt.Errorf("%d of %d records acquired within %v", got, want, e.Opts.SetupTimeout)
		}
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 200, 1, 64<<20
		req.MaxRecords, req.BatchSize = shareRSSLocks, shareRSSLocks
		if epoch == 0 { // later requests keep the session's partitions
			t := kmsg.NewShareFetchRequestTopic()
			t.TopicID = topicID
			for p := range int32(shareRSSPartitions) {
				tp := kmsg.NewShareFetchRequestTopicPartition()
				tp.Partition, tp.PartitionMaxBytes = p, 8<<20
				t.Partitions = append(t.Partitions, tp)
			}
			req.Topics = append(req.Topics, t)
		}
		t0 := time.Now()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return got, fmt.Errorf("share fetch: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return got, fmt.Errorf("share fetch: %w", err)
		}
		n := 0
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return got, fmt.Errorf("share fetch partition %d: %w", p.Partition, err)
				}
				for _, r := range p.AcquiredRecords {
					n += int(r.LastOffset - r.FirstOffset + 1)
				}
			}
		}
		if n > 0 {
			e.Rec.Op(int64(n), 0, time.Since(t0))
		}
		got += n
	}
	return got, nil
}
