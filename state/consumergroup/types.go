package consumergroup

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
)

// Error codes the coordinator answers with.
var (
	errUnknownMemberID         = kerr.UnknownMemberID.Code
	errIllegalGeneration       = kerr.IllegalGeneration.Code
	errRebalanceInProgress     = kerr.RebalanceInProgress.Code
	errCoordinatorNotAvailable = kerr.CoordinatorNotAvailable.Code
	errNotCoordinator          = kerr.NotCoordinator.Code
	errInconsistentProtocol    = kerr.InconsistentGroupProtocol.Code
	errMemberIDRequired        = kerr.MemberIDRequired.Code
	errFencedInstanceID        = kerr.FencedInstanceID.Code
	errGroupMaxSizeReached     = kerr.GroupMaxSizeReached.Code
	errGroupIDNotFound         = kerr.GroupIDNotFound.Code
	errNonEmptyGroup           = kerr.NonEmptyGroup.Code
	errSubscribedToTopic       = kerr.GroupSubscribedToTopic.Code
	errMetadataTooLarge        = kerr.OffsetMetadataTooLarge.Code
	errUnstableOffsetCommit    = kerr.UnstableOffsetCommit.Code
	errUnknownServerError      = kerr.UnknownServerError.Code
)

// JoinRequest is a JoinGroup as the coordinator sees it.
type JoinRequest struct {
	MemberID           string
	InstanceID         *string
	ProtocolType       string
	Protocols          []Protocol
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32 // v0: the session timeout
	ClientID           string
	ClientHost         string
	// RequireKnownMemberID: v4+ without an instance id (KIP-394).
	RequireKnownMemberID bool
	// SupportSkipAssignment: v9+ (static leader rejoining while Stable).
	SupportSkipAssignment bool
	Reason                string
}

// JoinMember is a member as the leader sees it in its JoinGroup answer.
type JoinMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte
}

// JoinResult is a JoinGroup answer.
type JoinResult struct {
	Err            int16
	MemberID       string
	Generation     int32
	ProtocolType   *string
	ProtocolName   *string
	Leader         string
	SkipAssignment bool
	Members        []JoinMember
}

func joinError(memberID string, code int16) JoinResult {
	return JoinResult{Err: code, MemberID: memberID, Generation: -1}
}

// SyncRequest is a SyncGroup as the coordinator sees it.
type SyncRequest struct {
	MemberID     string
	InstanceID   *string
	Generation   int32
	ProtocolType *string // v5+
	ProtocolName *string // v5+
	// Assignments is the leader's plan by member id (empty from
	// followers).
	Assignments map[string][]byte
}

// SyncResult is a SyncGroup answer.
type SyncResult struct {
	Err          int16
	ProtocolType *string
	ProtocolName *string
	Assignment   []byte
}

// HeartbeatRequest is a Heartbeat as the coordinator sees it.
type HeartbeatRequest struct {
	MemberID   string
	InstanceID *string
	Generation int32
}

// LeaveMember is one member named in a LeaveGroup.
type LeaveMember struct {
	MemberID   string
	InstanceID *string
	Reason     *string
}

// LeaveResult is one member's LeaveGroup answer.
type LeaveResult struct {
	MemberID   string
	InstanceID *string
	Err        int16
}

// CommitRequest is an OffsetCommit or TxnOffsetCommit as the coordinator
// sees it. Offsets carry no sequence numbers yet.
type CommitRequest struct {
	// Version is the OffsetCommit version (consumer group members must
	// use v9+; unchecked for TxnOffsetCommit).
	Version    int16
	MemberID   string
	InstanceID *string
	// Generation is the generation, or a consumer group member's epoch.
	Generation int32
	Offsets    map[model.TopicPartition]Offset
	// Transactional commits only.
	ProducerID    int64
	ProducerEpoch int16
}

// FetchedOffset is one partition's OffsetFetch answer.
type FetchedOffset struct {
	TP          model.TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	Err         int16
}

// Description is a DescribeGroups answer.
type Description struct {
	State        string
	ProtocolType string
	Protocol     string
	Members      []DescribedMember
}

// DescribedMember is a member in a DescribeGroups answer; metadata and
// assignment are filled only for a Stable group.
type DescribedMember struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	Metadata   []byte
	Assignment []byte
}

// mapStoreError is Apache's translation of a failed log append into the
// code a group request answers (storeGroup's and
// maybeConvertOffsetCommitError's common part).
func mapStoreError(code int16) int16 {
	switch code {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code:
		return errCoordinatorNotAvailable
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return errNotCoordinator
	case kerr.RequestTimedOut.Code:
		return errRebalanceInProgress
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidFetchSize.Code:
		return errUnknownServerError
	}
	return code
}

// mapCommitError is Apache's maybeConvertOffsetCommitError.
func mapCommitError(code int16) int16 {
	switch code {
	case kerr.NetworkException.Code:
		return kerr.CoordinatorLoadInProgress.Code
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code:
		return errCoordinatorNotAvailable
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return errNotCoordinator
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidFetchSize.Code:
		return kerr.InvalidCommitOffsetSize.Code
	}
	return code
}

// MapCommitError exposes maybeConvertOffsetCommitError for the
// TxnOffsetCommit verification step, which happens outside the group.
func MapCommitError(code int16) int16 { return mapCommitError(code) }
