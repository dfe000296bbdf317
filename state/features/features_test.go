package features

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestCheck(t *testing.T) {
	bad := kerr.InvalidUpdateVersion.Code
	for _, c := range []struct {
		name    string
		u       Update
		current int16
		open    int
		want    int16
	}{
		{"upgrade 1 to 2", Update{TransactionVersion, 2, Upgrade}, 1, 0, 0},
		{"same level", Update{TransactionVersion, 2, Upgrade}, 2, 3, 0},
		{"beyond max", Update{TransactionVersion, 3, Upgrade}, 2, 0, bad},
		{"unknown feature", Update{"group.version", 1, Upgrade}, 0, 0, bad},
		{"downgrade needs a downgrade type", Update{TransactionVersion, 1, Upgrade}, 2, 0, bad},
		{"safe downgrade", Update{TransactionVersion, 1, SafeDowngrade}, 2, 0, 0},
		{"unsafe downgrade to delete", Update{TransactionVersion, 0, UnsafeDowngrade}, 2, 0, 0},
		{"negative is delete", Update{TransactionVersion, -1, SafeDowngrade}, 1, 0, 0},
		{"upgrade with a downgrade type", Update{TransactionVersion, 2, SafeDowngrade}, 1, 0, bad},
		{"downgrade with TV2 transactions open", Update{TransactionVersion, 1, SafeDowngrade}, 2, 1, bad},
		{"unsafe downgrade with TV2 transactions open", Update{TransactionVersion, 1, UnsafeDowngrade}, 2, 1, bad},
		{"1 to 0 with TV2 open is not below 2 from 2", Update{TransactionVersion, 0, SafeDowngrade}, 1, 1, 0},
	} {
		if got, msg := Check(c.u, c.current, c.open); got != c.want {
			t.Errorf("%s: code %d (%s), want %d", c.name, got, msg, c.want)
		}
	}
}
