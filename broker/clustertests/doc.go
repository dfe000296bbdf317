// Package clustertests runs kaas as a cluster: a real etcd in the test
// process (coord/etcdembed) and brokers as real `kaas serve` child
// processes sharing one temporary data directory, driven by real clients.
// The tests live in one package so they can share the built binary; each
// test starts its own etcd and brokers so a failure in one cannot leak
// state into the next.
package clustertests
