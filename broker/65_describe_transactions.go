package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 65, min: 0, max: 0, serve: serveDescribeTransactions, fail: failDescribeTransactions})
}

// serveDescribeTransactions serves DescribeTransactions (key 65), version
// 0.
//
// Each transactional id's persisted coordinator entry: state (Apache's
// names), timeout, start time, producer id and epoch, and its partitions.
// An id without an entry → TRANSACTIONAL_ID_NOT_FOUND; a slot owned by a
// peer → NOT_COORDINATOR.
//
// With --authorizer: DESCRIBE on each transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); only partitions of topics the
// principal may DESCRIBE are listed.
func serveDescribeTransactions(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	a := b.sec.Access(c)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		if !a.TxnID(acl.Describe, id) {
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		if b.txnsFor(id) == nil {
			st.ErrorCode = kerr.NotCoordinator.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		e, ok := b.txnEntry(id)
		if !ok {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State, st.TimeoutMillis, st.StartTimestamp = e.State.String(), e.TimeoutMs, e.TxnStartMs
		st.ProducerID, st.ProducerEpoch = e.ProducerID, e.Epoch
		for _, tp := range e.Partitions {
			if !a.Visible(acl.Describe, acl.Topic, tp.Topic) {
				continue // only the partitions the principal may describe
			}
			if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic = tp.Topic
				st.Topics = append(st.Topics, t)
			}
			st.Topics[len(st.Topics)-1].Partitions = append(st.Topics[len(st.Topics)-1].Partitions, tp.Partition)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

func failDescribeTransactions(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ErrorCode = id, code
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}
