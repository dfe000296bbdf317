package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var topicSeq atomic.Int64

// shortPoll is the consumers' fetch max wait: long polls answer as soon as
// data arrives either way, and a short one lets a broker shut down
// promptly after a scenario (kaas waits for in-flight long polls).
const shortPoll = 500 * time.Millisecond

// uniqueTopic names a fresh topic, so a scenario can run repeatedly
// against the same --brokers broker.
func uniqueTopic(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

// client connects to the side's broker.
func (e *Env) client(opts ...kgo.Opt) (*kgo.Client, error) {
	// Retries stop after the setup timeout, so a side whose broker keeps
	// answering a retriable error (no coordinator) fails rather than hangs.
	base := append([]kgo.Opt{kgo.SeedBrokers(e.Target.Addrs...), kgo.RetryTimeout(e.Opts.SetupTimeout)}, e.Target.ClientOpts...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return cl, nil
}

// createTopic creates topic with partitions and waits until its metadata
// shows every partition with a leader.
func (e *Env) createTopic(ctx context.Context, topic string, partitions int) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if td, ok := md.Topics[topic]; ok && td.Err == nil && len(td.Partitions) == partitions {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for topic %s: %w", topic, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// fill produces n records of size bytes to topic as fast as it can (setup
// for the consuming scenarios; not measured).
func (e *Env) fill(ctx context.Context, topic string, n, size int) error {
	return e.fillSpread(ctx, topic, n, size, 0)
}

// fillSpread is fill with record i written to partition i%partitions
// (partitions > 0), for scenarios that need the same count in each; 0
// leaves the choice to the client's default partitioner. extra are more
// producer options (the share scenarios' batch size).
func (e *Env) fillSpread(ctx context.Context, topic string, n, size, partitions int, extra ...kgo.Opt) error {
	opts := append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5 * time.Millisecond)}, extra...)
	if partitions > 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := e.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	value, err := payloads(e.Opts.Payload, size)
	if err != nil {
		return err
	}
	var firstErr atomic.Pointer[error]
	for i := 0; i < n && firstErr.Load() == nil; i++ {
		r := &kgo.Record{Value: value(i)}
		if partitions > 0 {
			r.Partition = int32(i % partitions)
		}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("filling %s: %w", topic, err)
	}
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("filling %s: %w", topic, *p)
	}
	return nil
}

// fillCount scales a pre-filled data set to the measured duration, so a
// short smoke run stays short and a long run does not run dry.
func fillCount(d time.Duration, perSecond, lo, hi int) int {
	return max(lo, min(hi, int(d.Seconds()*float64(perSecond))))
}

// firstError keeps the first error reported from client callbacks.
type firstError struct{ p atomic.Pointer[error] }

func (f *firstError) set(err error) {
	if err != nil {
		f.p.CompareAndSwap(nil, &err)
	}
}

func (f *firstError) get() error {
	if p := f.p.Load(); p != nil {
		return *p
	}
	return nil
}
