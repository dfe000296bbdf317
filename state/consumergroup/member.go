package consumergroup

import "bytes"

// Protocol is one assignment protocol a member supports, with its
// metadata (for consumers: the subscription).
type Protocol struct {
	Name     string
	Metadata []byte
}

// Member is one group member (Apache's MemberMetadata).
type Member struct {
	ID                 string
	InstanceID         *string // static membership (KIP-345)
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32
	SessionTimeoutMs   int32
	ProtocolType       string
	Protocols          []Protocol // in the member's order of preference
	Assignment         []byte

	awaitingJoin func(JoinResult)
	awaitingSync func(SyncResult)
	// isNew: joined in the current rebalance and not yet given a
	// generation; only the new-member join timeout keeps it alive.
	isNew              bool
	heartbeatSatisfied bool
	hbToken            uint64
	hbCancel           func()
}

func (m *Member) isStatic() bool       { return m.InstanceID != nil }
func (m *Member) isAwaitingJoin() bool { return m.awaitingJoin != nil }
func (m *Member) isAwaitingSync() bool { return m.awaitingSync != nil }

// metadata is the member's metadata for protocol (nil if unsupported).
func (m *Member) metadata(protocol string) []byte {
	for _, p := range m.Protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// hasSatisfiedHeartbeat decides whether a heartbeat expiry removes the
// member: members parked in JoinGroup or SyncGroup are alive by
// definition, except new members, which only the join timeout covers.
func (m *Member) hasSatisfiedHeartbeat() bool {
	if m.isNew {
		return m.heartbeatSatisfied
	}
	if m.isAwaitingJoin() || m.isAwaitingSync() {
		return true
	}
	return m.heartbeatSatisfied
}

// matches reports whether protocols equal the member's, in order.
func (m *Member) matches(protocols []Protocol) bool {
	if len(protocols) != len(m.Protocols) {
		return false
	}
	for i, p := range protocols {
		if p.Name != m.Protocols[i].Name || !bytes.Equal(p.Metadata, m.Protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// vote is the member's most preferred protocol among candidates.
func (m *Member) vote(candidates map[string]bool) string {
	for _, p := range m.Protocols {
		if candidates[p.Name] {
			return p.Name
		}
	}
	return ""
}
