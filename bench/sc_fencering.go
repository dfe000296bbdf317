package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model/slots"
	"kaas/state/ownership"
	"kaas/storage/partlog/batchtest"
)

func init() {
	register(&Scenario{
		Name: "fence-ring",
		About: "cross-broker fence propagation in a cluster of 3 broker processes: InitProducerId bump on the " +
			"transactional id's coordinator (broker A) → the old epoch's idempotent batch refused by broker B " +
			"(goal p99 ≤ --fence-poll-interval + 100 ms)",
		Headline: "bumps", Latency: "propagation",
		Sides:    []string{"kaas"},
		NoTarget: true,
		Params: func(o *Options) string {
			return fmt.Sprintf("3 brokers, fence poll interval %v, bumps until %v have passed (at least one)", o.FencePoll, o.Duration)
		},
		Run: fenceRing,
	})
}

// fenceRing measures the seed's second ring. A zombie — the old session
// of a transactional id — keeps writing non-transactional (idempotent)
// batches through broker B, which leads the partition but is not the
// id's coordinator; only B's fence ring (its poll of the coordinator's
// fence file) can stop it. Per bump: the zombie's batch is accepted at
// the current epoch, then a new session's InitProducerId on the
// coordinator bumps the epoch, and the zombie writes again every 5 ms
// until B refuses it. The latency is the InitProducerId answer → the
// first refusal. Bumps start at a random moment of the poll cycle.
// (Transactional zombies are fenced at once through KIP-890
// verification; they are not what this measures.)
func fenceRing(ctx context.Context, e *Env) error {
	c, topic, cl, err := e.onCluster(ctx, 3, "bench-fence-ring")
	if err != nil {
		return err
	}
	defer c.close()
	defer cl.Close()
	sctx, cancel := withSetupTimeout(ctx, e.Opts)
	defer cancel()
	leaders, err := settledLeaders(sctx, cl, c, topic, e.Opts.Partitions)
	if err != nil {
		return err
	}
	id := ringID(c, leaders)
	// The coordinators settle too (the first broker up takes them, then
	// hands them on): the zombie must write through a broker that is not
	// the coordinator, or the bump fences it locally at once.
	coordinator, err := settledCoordinator(sctx, cl, c, id)
	if err != nil {
		return err
	}
	p, other := int32(-1), int32(-1)
	for q, l := range leaders {
		if l != coordinator {
			p, other = q, l
			break
		}
	}
	if p < 0 {
		return fmt.Errorf("every partition of %d is led by the coordinator %d; give more --partitions", e.Opts.Partitions, coordinator)
	}
	z := &zombie{cl: cl, broker: other, topic: topic, partition: p}
	if z.pid, z.epoch, err = initProducerID(sctx, cl, id); err != nil {
		return err
	}
	refusals := map[string]int{}
	e.Begin()
	for n := 0; n == 0 || (e.Running() && ctx.Err() == nil); n++ {
		// The zombie's session is live on B: a batch at its epoch (from
		// sequence 0 for a new epoch) is accepted.
		z.seq = 0
		if err := z.acceptedWithin(ctx, 30*time.Second); err != nil {
			return err
		}
		jitter := time.Duration(rand.Int64N(int64(e.Opts.FencePoll)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(jitter):
		}
		old := z.epoch
		pid, epoch, err := initProducerID(ctx, cl, id)
		if err != nil {
			return err
		}
		bumped := time.Now()
		if pid != z.pid || epoch <= old {
			return fmt.Errorf("InitProducerId gave %d/%d after %d/%d: not a bump", pid, epoch, z.pid, old)
		}
		for {
			code, err := z.write(ctx)
			if err != nil {
				return err
			}
			if code != 0 {
				e.Rec.Op(0, 0, time.Since(bumped))
				refusals[errorName(code)]++
				break
			}
			if time.Since(bumped) > time.Minute {
				return fmt.Errorf("broker %d still accepts the zombie a minute after the bump", other)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		z.epoch = epoch
		if now, err := txnCoordinator(ctx, cl, id); err != nil || now != coordinator {
			return fmt.Errorf("the coordinator moved from broker %d to %d during the run (%v)", coordinator, now, err)
		}
	}
	e.Note("coordinator broker %d, zombie writes through broker %d (partition %d); refused with %v", coordinator, other, p, refusals)
	e.SetValue(float64(e.Rec.ops.Load()), "bumps")
	e.Note("goal: p99 ≤ fence poll interval + 100 ms = %v", e.Opts.FencePoll+100*time.Millisecond)
	return nil
}

// zombie writes idempotent batches of one producer session through one
// broker.
type zombie struct {
	cl        *kgo.Client
	broker    int32
	topic     string
	partition int32
	pid       int64
	epoch     int16
	seq       int32
}

// write sends one batch at the zombie's epoch and next sequence and
// returns the partition's error code (0: accepted).
func (z *zombie) write(ctx context.Context) (int16, error) {
	b := batchtest.Build(batchtest.Opts{ProducerID: z.pid, ProducerEpoch: z.epoch, BaseSequence: z.seq, Timestamp: time.Now().UnixMilli()}, "zombie")
	err := produceTo(ctx, z.cl, z.broker, z.topic, z.partition, b)
	var ke *kerr.Error
	switch {
	case err == nil:
		z.seq++
		return 0, nil
	case errors.As(err, &ke):
		return ke.Code, nil
	}
	return 0, err
}

// acceptedWithin writes until a batch is accepted (B may still be
// loading the partition).
func (z *zombie) acceptedWithin(ctx context.Context, d time.Duration) error {
	var code int16
	err := waitFor(ctx, d, 20*time.Millisecond, fmt.Sprintf("broker %d accepting the zombie's session at epoch %d", z.broker, z.epoch), func() (bool, error) {
		var err error
		code, err = z.write(ctx)
		return err == nil && code == 0, nil
	})
	if err != nil && code != 0 {
		err = fmt.Errorf("%w (last refused with %s)", err, errorName(code))
	}
	return err
}

// ringID picks a transactional id whose coordinator (rendezvous hashing
// of its slot over the brokers, as they compute it) leads none of some
// partition, so the zombie has a broker to write through that only the
// fence ring can fence; with few partitions a random id may not have one.
func ringID(c *benchCluster, leaders map[int32]int32) string {
	ids := make([]int32, 0, len(c.members))
	for m := range c.members {
		ids = append(ids, m)
	}
	base := uniqueTopic("bench-fence-ring-id")
	for i := 0; ; i++ {
		id := fmt.Sprintf("%s-%d", base, i)
		coordinator := ownership.Owner(ownership.TxnSlotUnit(slots.Of(id)), ids)
		for _, l := range leaders {
			if l != coordinator {
				return id
			}
		}
		if i > 1000 {
			return id // one broker leads everything: the error below says so
		}
	}
}

// settledCoordinator waits until the coordinator of transactional id is
// the broker rendezvous hashing prefers among all the cluster's brokers,
// and returns it.
func settledCoordinator(ctx context.Context, cl *kgo.Client, c *benchCluster, id string) (int32, error) {
	ids := make([]int32, 0, len(c.members))
	for m := range c.members {
		ids = append(ids, m)
	}
	want := ownership.Owner(ownership.TxnSlotUnit(slots.Of(id)), ids)
	got := int32(-1)
	err := waitFor(ctx, time.Minute, 20*time.Millisecond, fmt.Sprintf("broker %d coordinating %s", want, id), func() (bool, error) {
		var err error
		got, err = txnCoordinator(ctx, cl, id)
		return got == want, err
	})
	return got, err
}

// txnCoordinator is the broker coordinating transactional id.
func txnCoordinator(ctx context.Context, cl *kgo.Client, id string) (int32, error) {
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1
		req.CoordinatorKey, req.CoordinatorKeys = id, []string{id}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return -1, err
		}
		node, code := resp.NodeID, resp.ErrorCode
		if len(resp.Coordinators) > 0 {
			node, code = resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
		}
		if code == 0 {
			return node, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("finding the coordinator of %s: %v (%w)", id, kerr.ErrorForCode(code), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// initProducerID starts a session of transactional id (a bump when one
// existed), retrying what is retriable.
func initProducerID(ctx context.Context, cl *kgo.Client, id string) (int64, int16, error) {
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = 60_000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, 0, err
		}
		switch code := resp.ErrorCode; code {
		case 0:
			return resp.ProducerID, resp.ProducerEpoch, nil
		case kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
		default:
			return 0, 0, fmt.Errorf("InitProducerId: %w", kerr.ErrorForCode(code))
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// errorName is a Kafka error code's name.
func errorName(code int16) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return fmt.Sprint(code)
}
