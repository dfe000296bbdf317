package chaos

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// eosGroup is the exactly-once workload's consumer group.
const eosGroup = "chaos-eos"

var errUnconfirmed = errors.New("franz-go reported the end of the transaction unconfirmed")

// runEOS is a consume-transform-produce loop in a GroupTransactSession:
// it reads txnTopic with read_committed and writes one output per input
// record to outTopic (partition for partition), committing the consumed
// offsets in the same transaction; one transaction in ten aborts on
// purpose. Once drain is closed it stops after three empty polls in a
// row, or when ctx ends.
func (w *worker) runEOS(ctx context.Context, drain <-chan struct{}) {
	log := w.c.logs.get(w.name)
	var sess *kgo.GroupTransactSession
	var closeSession func()
	defer func() {
		if sess != nil {
			closeSession()
		}
	}()
	retire := func() {
		closeSession()
		sess = nil
		w.inc++
		time.Sleep(100 * time.Millisecond) // no spin on a client that fails at once
	}
	empty := 0
	for n := int64(0); ctx.Err() == nil; {
		if sess == nil {
			opts := append(w.c.clientOpts(w.timeout, w.name),
				kgo.TransactionalID("chaos-"+w.name), kgo.TransactionTimeout(txnTimeout),
				kgo.ConsumerGroup(eosGroup), kgo.ConsumeTopics(txnTopic),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.SessionTimeout(6*time.Second), kgo.RebalanceTimeout(6*time.Second), kgo.HeartbeatInterval(time.Second),
				kgo.FetchMaxWait(500*time.Millisecond))
			var err error
			if sess, err = kgo.NewGroupTransactSession(opts...); err != nil {
				w.logf("%s: %v", w.name, err)
				return
			}
			closeSession = w.holding(sess.Close)
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := sess.PollRecords(pctx, 20)
		cancel()
		if fetches.IsClientClosed() {
			return
		}
		recs := fetches.Records()
		if len(recs) == 0 {
			select {
			case <-drain:
				if empty++; empty >= 3 {
					return
				}
			default:
			}
			continue
		}
		empty = 0
		if err := sess.Begin(); err != nil {
			retire()
			continue
		}
		n++
		txn := txnID(w.process(), n)
		inputs := make([]Rec, len(recs))
		var b batch
		for i, r := range recs {
			inputs[i] = Rec{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)}
			b.send(w, sess.Client(), txn, outTopic, r.Partition%partitions, outputValue(txn, i, string(r.Value)))
		}
		if !b.flush(sess.Client()) {
			retire()
			b.wg.Wait()
			continue
		}
		intent := Commit
		if b.failed.Load() || w.rng.IntN(10) == 0 {
			intent = Abort
		}
		log.unconfirmed.Store(false)
		t, err := w.end(txn, intent, func(try kgo.TransactionEndTry) (bool, error) {
			ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			committed, err := sess.End(ectx, try)
			if err == nil && log.unconfirmed.Load() {
				err = errUnconfirmed
			}
			return committed, err
		}, inputs...)
		if t == Info || err != nil {
			retire()
		}
	}
}
