package broker

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model/txnstate"
	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 66, min: 0, max: 2, serve: serveListTransactions, fail: failListTransactions})
}

// serveListTransactions serves ListTransactions (key 66), versions 0–2.
//
// Every transactional id this broker coordinates, filtered by state names
// and producer ids when given. Filter states that are not Apache state
// names come back in UnknownStateFilters. v1 (KIP-994) keeps only
// transactions running longer than DurationFilterMillis (-1: all), v2
// (KIP-1152) only ids the TransactionalIDPattern regular expression
// matches whole (as Java's Matcher.matches; RE2 syntax), a pattern that
// does not compile being INVALID_REGULAR_EXPRESSION — as Apache's
// TransactionStateManager.listTransactionStates.
//
// With --authorizer: only the transactional ids the principal may DESCRIBE
// are listed.
func serveListTransactions(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	known := map[string]bool{}
	for s := txnstate.Empty; s <= txnstate.PrepareEpochFence; s++ {
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
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if pattern, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			b.log.Info("list transactions: bad transactional id pattern", "pattern", *req.TransactionalIDPattern, "err", err)
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp
		}
	}
	now := time.Now().UnixMilli()
	a := b.sec.Access(c)
	for _, e := range b.txnEntries() {
		if len(req.StateFilters) > 0 && !states[e.State.String()] || len(pids) > 0 && !pids[e.ProducerID] {
			continue
		}
		if req.Version >= 1 && req.DurationFilterMillis >= 0 && now-e.TxnStartMs <= req.DurationFilterMillis {
			continue
		}
		if pattern != nil && !pattern.MatchString(e.TransactionalID) {
			continue
		}
		if !a.Visible(acl.Describe, acl.TransactionalID, e.TransactionalID) {
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
