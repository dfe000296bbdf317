// Package chaos is kaas's own Jepsen-style fault checker: a cluster of
// three `kaas serve` brokers and a `kaas etcd` as child processes on one
// data directory, a nemesis that kills, pauses and network-partitions
// them, franz-go workloads with short timeouts (idempotent producers,
// transactional producers that commit and abort, an exactly-once
// consume-transform-produce group, live readers at both isolation
// levels), a history of every operation, and a checker that reads the
// whole history plus a final read of every partition and reports each
// anomaly it proves (see docs/chaos.md).
//
// The checker (Check) is a pure function of the history and the final
// reads, so every anomaly kind is table-tested on crafted histories;
// the harness (Run) needs only the kaas binary and Kafka clients, so
// nothing here imports the broker.
package chaos
