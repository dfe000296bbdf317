package chaos

import (
	"strconv"
	"strings"
)

// Every value a workload writes is unique and names who wrote it, so the
// checker can attribute any record it finds:
//
//	i<n>.<inc>:<seq>                     idempotent producer n, client incarnation inc
//	t<n>.<inc>:<txn>:<i>                 transactional producer: the i-th record of its txn-th transaction
//	c<n>.<inc>:<txn>:<i>|<input value>   consume-transform-produce output of one input record
//	s:<topic>:<partition>:<attempt>      the end-of-log sentinel the final read waits for
//
// The incarnation changes when a workload replaces its client, so order
// is checked per client: a closed client's late request is not ordered
// against its successor's.

// attr is what a value says about itself.
type attr struct {
	producer string // "i1.0", "t2.3", "c1.0", "s"
	txn      string // "t2.3:17" for transactional values, else ""
	major    int64  // seq (idempotent) or transaction number
	minor    int64  // record index within the transaction
	input    string // the input value a consume-transform-produce output came from
	sentinel bool
}

func idempotentValue(producer string, seq int64) string {
	return producer + ":" + strconv.FormatInt(seq, 10)
}

func txnID(producer string, txn int64) string {
	return producer + ":" + strconv.FormatInt(txn, 10)
}

func txnValue(txn string, i int) string { return txn + ":" + strconv.Itoa(i) }

func outputValue(txn string, i int, input string) string {
	return txnValue(txn, i) + "|" + input
}

func sentinelValue(topic string, partition int32, attempt int) string {
	return "s:" + topic + ":" + strconv.Itoa(int(partition)) + ":" + strconv.Itoa(attempt)
}

// parseValue decodes a value; ok is false for anything no workload
// writes.
func parseValue(v string) (a attr, ok bool) {
	if strings.HasPrefix(v, "s:") {
		return attr{producer: "s", sentinel: true}, true
	}
	head, input, isOutput := strings.Cut(v, "|")
	parts := strings.Split(head, ":")
	if len(parts) < 2 || len(parts[0]) < 2 {
		return attr{}, false
	}
	a.producer = parts[0]
	kind := parts[0][0]
	nums := make([]int64, len(parts)-1)
	for i, p := range parts[1:] {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return attr{}, false
		}
		nums[i] = n
	}
	switch {
	case kind == 'i' && len(nums) == 1 && !isOutput:
		a.major = nums[0]
	case (kind == 't' && !isOutput || kind == 'c' && isOutput) && len(nums) == 2:
		a.txn = txnID(a.producer, nums[0])
		a.major, a.minor = nums[0], nums[1]
		a.input = input
	default:
		return attr{}, false
	}
	return a, true
}
