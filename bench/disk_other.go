//go:build !linux

package bench

import (
	"errors"
	"os"
)

// openDirect: O_DIRECT is Linux's; compact-clean, its one user, runs
// only there.
func openDirect(string, int) (*os.File, error) {
	return nil, errors.New("O_DIRECT: linux only")
}
