package consumergroup

// Describe is the group's DescribeGroups answer (Apache's summary):
// member metadata and assignments only once the group is Stable.
func (g *Group) Describe() Description {
	if g.cg != nil {
		// DescribeGroups v0–5 describes classic groups only; Apache
		// answers Dead for any other (v6's GROUP_ID_NOT_FOUND is beyond
		// what kmsg decodes).
		return Description{State: Dead.String()}
	}
	d := Description{State: g.state.String(), ProtocolType: g.protocolType}
	stable := g.state == Stable && g.protocolName != nil
	if stable {
		d.Protocol = *g.protocolName
	}
	for _, id := range g.order {
		m := g.members[id]
		dm := DescribedMember{MemberID: id, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost, Metadata: []byte{}, Assignment: []byte{}}
		if stable {
			dm.Metadata, dm.Assignment = m.metadata(d.Protocol), m.Assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// Summary is what the inspector and ListGroups see of a group.
type Summary struct {
	Group string `json:"group"`
	// Type is "classic" or "consumer" (KIP-848).
	Type         string `json:"type"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"`
	Generation   int32  `json:"generation"` // a consumer group's group epoch
	// AssignmentEpoch is a consumer group's target assignment epoch.
	AssignmentEpoch int32           `json:"assignment_epoch,omitempty"`
	Leader          string          `json:"leader"`
	Members         []MemberSummary `json:"members"`
	Offsets         int             `json:"committed_offsets"`
	// PendingTxnProducers counts producers with staged offsets.
	PendingTxnProducers int `json:"pending_txn_producers"`
}

// MemberSummary is one member in a Summary.
type MemberSummary struct {
	MemberID        string  `json:"member_id"`
	InstanceID      *string `json:"instance_id,omitempty"`
	ClientID        string  `json:"client_id"`
	ClientHost      string  `json:"client_host"`
	AssignmentBytes int     `json:"assignment_bytes"`
	// Consumer is set for a consumer group's member.
	Consumer *ConsumerMemberSummary `json:"consumer,omitempty"`
}

// Summarize is the group's Summary.
func (g *Group) Summarize() *Summary {
	s := &Summary{
		Group: g.id, Type: "classic", State: g.state.String(), ProtocolType: g.protocolType, Generation: g.generation,
		Leader: g.leader, Offsets: len(g.offsets), PendingTxnProducers: len(g.pendingTxn),
	}
	if g.cg != nil {
		g.consumerSummary(s)
		return s
	}
	if g.protocolName != nil {
		s.Protocol = *g.protocolName
	}
	for _, id := range g.order {
		m := g.members[id]
		s.Members = append(s.Members, MemberSummary{MemberID: id, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost, AssignmentBytes: len(m.Assignment)})
	}
	return s
}
