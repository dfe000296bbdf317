// Package tools finds the non-Go clients the interop tests drive (Debian's
// python3-confluent-kafka). It imports nothing of kaas, so the broker
// package's own tests can use it as well as brokertest's users.
package tools

import (
	"os/exec"
	"testing"
)

// Python is the interpreter that sees Debian's python3-confluent-kafka (a
// pyenv python earlier on PATH would not). The test fails, never skips,
// when it is missing: `.ci/run` installs it.
func Python(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil {
			if exec.Command(path, "-c", "import confluent_kafka").Run() == nil {
				return path
			}
		}
	}
	t.Fatal("python3-confluent-kafka is not installed (apt-get install python3-confluent-kafka; .ci/run does)")
	return ""
}
