package broker

// ListTransactions (key 66), version 0.
//
// Every transactional id this broker coordinates, filtered by state names
// and producer ids when given. Filter states that are not Apache state
// names come back in UnknownStateFilters.
//
// With --authorizer: only the transactional ids the principal may DESCRIBE
// are listed.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/storage/txnlog"
)

func init() {
	register(api{key: 66, min: 0, max: 0, serve: serveListTransactions, fail: failListTransactions})
}

func serveListTransactions(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	known := map[string]bool{}
	for s := txnlog.Empty; s <= txnlog.PrepareEpochFence; s++ {
		known[s.String()] = true
	}
	states := map[string]bool{}
	for _, s := range req.StateFilters {
		if known[s] {
			states[s] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIDFilters {
		pids[p] = true
	}
	a := b.access(c)
	for _, e := range b.txnEntries() {
		if len(req.StateFilters) > 0 && !states[e.State.String()] || len(pids) > 0 && !pids[e.ProducerID] {
			continue
		}
		if !a.visible(acl.Describe, acl.TransactionalID, e.TransactionalID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = e.TransactionalID, e.ProducerID, e.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

func failListTransactions(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	resp.ErrorCode = code
	return resp
}
