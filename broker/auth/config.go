// Package auth is a broker's authentication and the state its
// authorization reads: the users and ACLs (persisted through
// storage/authstore, published as immutable snapshots), each
// connection's SASL exchange as Apache's SaslServerAuthenticator runs it,
// KIP-368 re-authentication, and KAAS-PEER, how cluster brokers prove
// themselves to each other, and the per-request checks the handlers make
// (Access, access.go) against the authorizer published here. The
// decisions themselves are state/acl's and the SASL mechanisms
// state/sasl's.
package auth

import (
	"log/slog"
	"time"

	"kaas/metrics"
)

// Config is what authentication takes from the broker's configuration
// (broker.Config's fields of the same names, docs/security.md).
type Config struct {
	DataDir                string
	Authorizer             bool
	SuperUsers             []string
	AllowEveryoneIfNoACL   bool
	SASLMechanisms         []string
	SASLPlainAllowInsecure bool
	FailedAuthDelay        time.Duration
	ConnectionsMaxReauth   time.Duration

	Logger  *slog.Logger
	Metrics *metrics.Metrics
	// Cluster reports the cluster's peer secret (peer.go).
	Cluster Cluster
}
