package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every API's error codes are counted, wherever in the answer they sit.
func TestEachErrorCodeFindsNestedCodes(t *testing.T) {
	createTopics := kmsg.NewPtrCreateTopicsResponse()
	for _, code := range []int16{0, kerr.TopicAlreadyExists.Code, kerr.InvalidPartitions.Code} {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.ErrorCode = code
		createTopics.Topics = append(createTopics.Topics, rt)
	}
	describeGroups := kmsg.NewPtrDescribeGroupsResponse()
	g := kmsg.NewDescribeGroupsResponseGroup()
	g.ErrorCode = kerr.GroupIDNotFound.Code
	describeGroups.Groups = append(describeGroups.Groups, g)
	leave := kmsg.NewPtrLeaveGroupResponse()
	leave.ErrorCode = kerr.UnknownMemberID.Code
	m := kmsg.NewLeaveGroupResponseMember()
	m.ErrorCode = kerr.FencedInstanceID.Code
	leave.Members = append(leave.Members, m)
	produce := kmsg.NewPtrProduceResponse()
	pt := kmsg.NewProduceResponseTopic()
	pp := kmsg.NewProduceResponseTopicPartition()
	pp.ErrorCode = kerr.InvalidProducerEpoch.Code
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	apiVersions := kmsg.NewPtrApiVersionsResponse()

	for _, tc := range []struct {
		name string
		resp kmsg.Response
		want []int16
	}{
		{"CreateTopics per topic", createTopics, []int16{kerr.TopicAlreadyExists.Code, kerr.InvalidPartitions.Code}},
		{"DescribeGroups per group", describeGroups, []int16{kerr.GroupIDNotFound.Code}},
		{"LeaveGroup top level and per member", leave, []int16{kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code}},
		{"Produce hot path", produce, []int16{kerr.InvalidProducerEpoch.Code}},
		{"no errors", apiVersions, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int16
			for range 2 { // the second pass uses the cached walk
				got = got[:0]
				eachErrorCode(tc.resp, func(c int16) { got = append(got, c) })
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("codes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestErrorNameIsTheKafkaName(t *testing.T) {
	for code, want := range map[int16]string{
		kerr.TopicAlreadyExists.Code: "TOPIC_ALREADY_EXISTS",
		kerr.UnknownServerError.Code: "UNKNOWN_SERVER_ERROR",
		9999:                         "ERROR_CODE_9999",
	} {
		if got := errorName(code); got != want {
			t.Errorf("errorName(%d) = %q, want %q", code, got, want)
		}
	}
}
