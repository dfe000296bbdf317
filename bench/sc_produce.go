package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"golang.org/x/sync/errgroup"
)

func init() {
	register(&Scenario{
		Name:     "produce",
		About:    "one franz-go producer at full rate, acks=all, idempotence off (issue 2's benchmark)",
		Headline: "records", Latency: "ack",
		Run: produceAtFullRate(produceOpts{}),
	})
	register(&Scenario{
		Name:     "produce-idempotent",
		About:    "one idempotent franz-go producer at full rate, acks=all (goal: within 5% of plain produce)",
		Headline: "records", Latency: "ack",
		Run: produceAtFullRate(produceOpts{idempotent: true}),
	})
	register(&Scenario{
		Name:     "produce-quota",
		About:    "the produce scenario on kaas with producer_byte_rate and request_percentage quotas on the producer's client id set far above its rate (kaas-quota) against kaas without (goal: no measurable cost, kaas-quota ≥ 0.98× kaas)",
		Headline: "records", Latency: "ack",
		Sides: []string{sideQuota, "kaas"},
		Run:   produceAtFullRate(produceOpts{quota: true}),
	})
	register(&Scenario{
		Name:     "produce-txn",
		About:    "--producers transactional producers (default 1, each its own transactional id, all at once), transactions of 100 records, each committed before the producer's next begins",
		Headline: "records", Latency: "transaction",
		Run: produceTransactions(100),
	})
	register(&Scenario{
		Name:     "txn-commit",
		About:    "transaction commit rate: --producers transactional producers (default 1, all at once), each running transactions of 1 record one after another",
		Headline: "transactions", Latency: "transaction",
		Run: produceTransactions(1),
	})
}

type produceOpts struct {
	idempotent bool
	// quota: on the kaas-quota side the producer's client id gets
	// quotas it never reaches, so every request is measured and none
	// throttled; the other side runs the same client id without.
	quota bool
}

// sideQuota is a kaas broker like the plain side's, on which
// produce-quota sets its quotas.
const sideQuota = "kaas-quota"

// benchQuotaClientID is the client id produce-quota's quotas name.
const benchQuotaClientID = "bench-quota"

// setFarQuotas gives benchQuotaClientID a producer_byte_rate of 1 TB/s
// and a request_percentage of 1,000,000%.
func (e *Env) setFarQuotas(ctx context.Context) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	name := benchQuotaClientID
	res, err := kadm.NewClient(cl).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1e12}, {Key: "request_percentage", Value: 1e6}},
	}})
	if err != nil {
		return fmt.Errorf("setting quotas: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("setting quotas: %w %s", r.Err, r.ErrMessage)
		}
	}
	return nil
}

func producerOpts(e *Env, topic string) []kgo.Opt {
	return []kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(e.Opts.Linger),
	}
}

// produceAtFullRate loops Produce from one goroutine; the client's buffer
// (10,000 records) is the only limit. A record's latency runs from the
// Produce call to its acknowledgement.
func produceAtFullRate(po produceOpts) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
		topic := uniqueTopic("bench-produce")
		if err := e.createTopic(ctx, topic, e.Opts.Partitions); err != nil {
			return err
		}
		timer := &requestTimer{key: 0}
		opts := append(producerOpts(e, topic), kgo.WithHooks(timer))
		if po.quota {
			if e.Side == sideQuota {
				if err := e.setFarQuotas(ctx); err != nil {
					return err
				}
			}
			opts = append(opts, kgo.ClientID(benchQuotaClientID))
		}
		if !po.idempotent {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl, err := e.client(opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		value, err := payloads(e.Opts.Payload, e.Opts.RecordSize)
		if err != nil {
			return err
		}
		// Warm up: metadata, producer id, connections.
		sctx, cancel := withSetupTimeout(ctx, e.Opts)
		defer cancel()
		if err := cl.ProduceSync(sctx, &kgo.Record{Value: value(0)}).FirstErr(); err != nil {
			return fmt.Errorf("first produce: %w", err)
		}
		var fail firstError
		timer.h = Hist{}
		before := readFsyncCounts(e)
		e.Begin()
		for i := 0; e.Running() && fail.get() == nil && ctx.Err() == nil; i++ {
			start := time.Now()
			cl.Produce(ctx, &kgo.Record{Value: value(i)}, func(r *kgo.Record, err error) {
				if err != nil {
					fail.set(err)
					return
				}
				e.Rec.Op(1, int64(len(r.Value)), time.Since(start))
			})
		}
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		timer.note(e, "Produce")
		serverLatencyNote(e, "Produce")
		produceFsyncNote(e, before, timer)
		return fail.get()
	}
}

// produceTransactions runs --producers transactional producers (default
// 1), each with its own transactional id and running transactions of size
// records back to back, all at once; an op (and its latency) is one whole
// transaction, begin to committed.
func produceTransactions(size int) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
		topic := uniqueTopic("bench-txn")
		if err := e.createTopic(ctx, topic, e.Opts.Partitions); err != nil {
			return err
		}
		value, err := payloads(e.Opts.Payload, e.Opts.RecordSize)
		if err != nil {
			return err
		}
		n := orDefault(e.Opts.Producers, 1)
		producers := make([]*txnProducer, n)
		defer func() {
			for _, p := range producers {
				if p != nil {
					p.cl.Close()
				}
			}
		}()
		opts := append(producerOpts(e, topic), txnVersionOpts(e.Opts.TxnVersion)...)
		for i := range producers {
			cl, err := e.client(append(opts, kgo.TransactionalID(uniqueTopic("bench-txn-id")))...)
			if err != nil {
				return err
			}
			producers[i] = &txnProducer{cl: cl, e: e, size: size, value: value}
		}
		// Warm up every producer (producer id, coordinator), together.
		sctx, cancel := withSetupTimeout(ctx, e.Opts)
		defer cancel()
		var warm errgroup.Group
		for _, p := range producers {
			warm.Go(func() error {
				if err := p.txn(sctx, false); err != nil {
					return fmt.Errorf("first transaction: %w", err)
				}
				return nil
			})
		}
		if err := warm.Wait(); err != nil {
			return err
		}
		before, hand := readFsyncCounts(e), readHandoffs(e)
		e.Begin()
		var run errgroup.Group
		for _, p := range producers {
			run.Go(func() error {
				for e.Running() && ctx.Err() == nil {
					if err := p.txn(ctx, true); err != nil {
						return err
					}
				}
				return nil
			})
		}
		err = run.Wait()
		handoffsPerOpNote(e, hand, "transaction")
		schedNote(e)
		e.EndMeasuring() // the notes read the broker's metrics (and time the machine's fsync)
		e.Note("transaction version %d clients (--txn-version)", txnVersionOf(e.Opts.TxnVersion))
		for _, api := range []string{"AddPartitionsToTxn", "Produce", "EndTxn"} {
			serverLatencyNote(e, api)
		}
		fsyncs := fsyncsPerOpNote(e, before, "transaction")
		fsyncLatencyNote(e, before)
		fsyncP50 := fsyncNote(e, 0)
		if before.ok && n == 1 && e.Opts.FlushInterval == 0 {
			txnLatencyGoalNote(e, fsyncP50) // kaas, fsync on, one producer
		}
		txnFsyncCPUNote(e, fsyncs)
		return err
	}
}

// txnVersionOf is the transaction version --txn-version asks for.
func txnVersionOf(v int) int {
	if v == 1 {
		return 1
	}
	return 2
}

// txnVersionOpts caps a transactional client below transaction version 2
// (Produce v11, EndTxn v4, TxnOffsetCommit v4) for --txn-version 1; with
// 2, franz-go opts in wherever the broker finalizes it.
func txnVersionOpts(v int) []kgo.Opt {
	if txnVersionOf(v) == 2 {
		return nil
	}
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(0, 11)
	vs.SetMaxKeyVersion(26, 4)
	vs.SetMaxKeyVersion(28, 4)
	return []kgo.Opt{kgo.MaxVersions(vs)}
}

// txnProducer is one transactional producer of produceTransactions.
type txnProducer struct {
	cl    *kgo.Client
	e     *Env
	size  int
	value func(int) []byte
	n     int
}

// txn runs one transaction of p.size records, recording it when measure.
func (p *txnProducer) txn(ctx context.Context, measure bool) error {
	var fail firstError
	start := time.Now()
	if err := p.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for range p.size {
		p.n++
		p.cl.Produce(ctx, &kgo.Record{Value: p.value(p.n)}, func(r *kgo.Record, err error) {
			if err != nil {
				fail.set(err)
				return
			}
			if measure {
				p.e.Rec.Data(1, int64(len(r.Value)))
			}
		})
	}
	if err := p.cl.Flush(ctx); err != nil {
		return err
	}
	if err := fail.get(); err != nil {
		_ = p.cl.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("produce in transaction: %w", err)
	}
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if measure {
		p.e.Rec.Op(0, 0, time.Since(start))
	}
	return nil
}
