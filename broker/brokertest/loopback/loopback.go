// Package loopback is model/loopback for tests: a free loopback address,
// or the test fails. It imports nothing of kaas above model, so the
// broker package's own tests can use it as well as brokertest's users.
package loopback

import (
	"testing"

	"kaas/model/loopback"
)

// FreeAddr returns a loopback host:port that nothing listens on, picked
// below the kernel's ephemeral range (loopback.Pick says why).
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := loopback.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
