package broker_test

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"kaas/broker/brokertest"
)

// kcat runs kcat (librdkafka) against the broker. The test fails, never
// skips, when kcat is not installed: `.ci/run` installs it.
func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat is not installed (apt-get install -y kcat; .ci/run does it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// TestKcatInterop: librdkafka (through kcat) produces with every codec,
// keyed and idempotent, to an existing and an auto-created topic, lists
// metadata, and consumes everything back byte for byte.
func TestKcatInterop(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "kcat", 3, nil)
	var want []string
	for i, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var lines []string
		for j := 0; j < 50; j++ {
			line := fmt.Sprintf("key-%d-%d:value %s %03d", i, j%7, codec, j)
			lines = append(lines, line)
			want = append(want, strings.Replace(line, ":", "=", 1))
		}
		args := []string{"-b", b.Addr(), "-t", "kcat", "-P", "-K:", "-z", codec, "-X", "enable.idempotence=true", "-q"}
		kcat(t, strings.Join(lines, "\n")+"\n", args...)
	}
	out := kcat(t, "", "-b", b.Addr(), "-t", "kcat", "-C", "-e", "-o", "beginning", "-q", "-f", "%k=%s\n")
	got := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("kcat consumed %d records, want %d; first: %q", len(got), len(want), got[:min(3, len(got))])
	}

	// Producing to an unknown topic auto-creates it (auto.create.topics.enable).
	kcat(t, "fresh\n", "-b", b.Addr(), "-t", "kcat-auto", "-P", "-q")
	if out := kcat(t, "", "-b", b.Addr(), "-t", "kcat-auto", "-C", "-e", "-q"); strings.TrimSpace(out) != "fresh" {
		t.Fatalf("auto-created topic holds %q", out)
	}
	md := kcat(t, "", "-b", b.Addr(), "-L")
	for _, want := range []string{`topic "kcat" with 3 partitions`, `topic "kcat-auto" with 1 partitions`, "broker 0 at " + b.Addr()} {
		if !strings.Contains(md, want) {
			t.Fatalf("kcat -L lacks %q:\n%s", want, md)
		}
	}
}
