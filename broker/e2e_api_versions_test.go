package broker_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// servedVersions is every API key kaas serves and its versions, as
// docs/admin.md lists them: from the oldest Kafka 3.7 serves to the newest
// kmsg decodes, transaction version 2's included, except Produce v13 and
// TxnOffsetCommit v6 (topic ids), WriteTxnMarkers v2 and
// OffsetCommit/OffsetFetch v10 (topic ids, Kafka 4.2). The share group
// keys (76–79, 90–92) are served by a single broker only.
var servedVersions = map[int16][2]int16{
	0: {0, 12}, 1: {0, 18}, 2: {0, 11}, 3: {0, 13}, 8: {0, 9}, 9: {0, 9}, 10: {0, 6},
	11: {0, 9}, 12: {0, 4}, 13: {0, 5}, 14: {0, 5}, 15: {0, 6}, 16: {0, 5}, 17: {0, 1},
	18: {0, 5}, 19: {0, 7}, 20: {0, 6}, 21: {0, 2}, 22: {0, 5}, 23: {0, 4}, 24: {0, 5},
	25: {0, 4}, 26: {0, 5}, 27: {0, 1}, 28: {0, 5}, 29: {0, 3}, 30: {0, 3}, 31: {0, 3},
	32: {0, 4}, 33: {0, 2}, 34: {0, 2}, 35: {0, 5}, 36: {0, 2}, 37: {0, 3}, 42: {0, 3},
	43: {0, 2}, 44: {0, 1}, 45: {0, 1}, 46: {0, 0}, 47: {0, 0}, 48: {0, 1}, 49: {0, 1}, 50: {0, 0}, 51: {0, 0},
	60: {0, 2}, 61: {0, 0}, 65: {0, 0}, 66: {0, 2}, 68: {0, 1}, 69: {0, 1}, 71: {0, 0}, 72: {0, 0}, 74: {0, 1},
	57: {0, 2}, 75: {0, 0}, 76: {0, 1}, 77: {0, 1}, 78: {0, 2}, 79: {0, 2}, 90: {0, 1}, 91: {0, 0}, 92: {0, 0},
}

// TestAPIVersionsTable: ApiVersions answers exactly the table above (it is
// built from the table the router dispatches on, so this pins both).
func TestAPIVersionsTable(t *testing.T) {
	b := brokertest.Start(t)
	resp := brokertest.Dial(t, b.Addr()).RoundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if fmt.Sprint(got) != fmt.Sprint(servedVersions) {
		for k, v := range servedVersions {
			if got[k] != v {
				t.Errorf("key %d (%s): served %v, want %v", k, kmsg.NameForKey(k), got[k], v)
			}
		}
		for k, v := range got {
			if _, ok := servedVersions[k]; !ok {
				t.Errorf("key %d (%s) served %v, not in the table", k, kmsg.NameForKey(k), v)
			}
		}
	}
}
