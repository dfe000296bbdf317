//go:build !linux

package brokertest

import "errors"

// LimitOpenFiles needs prlimit(2), which only Linux has: the descriptor
// tests that call it skip elsewhere.
func (p *Process) LimitOpenFiles(n uint64) error {
	return errors.ErrUnsupported
}
