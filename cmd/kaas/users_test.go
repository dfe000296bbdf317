package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"kaas/broker/brokertest"
)

// TestUsersAdd: the first user is created offline, then a broker with
// only a SASL listener and the authorizer on lets that super user in, and
// nobody else.
func TestUsersAdd(t *testing.T) {
	dir := t.TempDir()
	add := func(stdin string, args ...string) (string, int) {
		cmd := exec.Command(brokertest.Binary(t), append([]string{"users", "add"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := add("s3cret\n", "--data", dir, "--user", "admin", "--password-stdin"); code != 0 {
		t.Fatalf("users add exited %d: %s", code, out)
	}
	if out, code := add("s3cret\n", "--data", dir, "--user", "admin", "--mechanism", "SCRAM-SHA-512", "--password-stdin"); code != 0 {
		t.Fatalf("users add SCRAM-SHA-512 exited %d: %s", code, out)
	}
	for _, tc := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"x\n", []string{"--data", dir, "--user", "u"}, 2, "--password-stdin"},
		{"x\n", []string{"--user", "u", "--password-stdin"}, 2, "--data and --user"},
		{"\n", []string{"--data", dir, "--user", "u", "--password-stdin"}, 1, "no password"},
		{"x\n", []string{"--data", dir, "--user", "u", "--mechanism", "PLAIN", "--password-stdin"}, 1, "SCRAM-SHA-256 or SCRAM-SHA-512"},
		{"x\n", []string{"--data", dir, "--user", "u", "--iterations", "100", "--password-stdin"}, 1, "iterations"},
	} {
		if out, code := add(tc.stdin, tc.args...); code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("users add %v: exit %d, %q; want exit %d mentioning %q", tc.args, code, out, tc.code, tc.want)
		}
	}

	p := brokertest.Serve(t, dir, "--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--authorizer", "--super-users", "User:admin")
	ctx := brokertest.Context(t, time.Minute)
	for _, m := range []kgo.Opt{
		kgo.SASL(scram.Auth{User: "admin", Pass: "s3cret"}.AsSha256Mechanism()),
		kgo.SASL(scram.Auth{User: "admin", Pass: "s3cret"}.AsSha512Mechanism()),
	} {
		adm := kadm.NewClient(brokertest.Client(t, p.Addr, m))
		if _, err := adm.ListBrokers(ctx); err != nil {
			t.Fatalf("admin cannot connect: %v", err)
		}
	}
	bad := brokertest.Client(t, p.Addr, kgo.SASL(scram.Auth{User: "admin", Pass: "wrong"}.AsSha256Mechanism()), kgo.RequestRetries(0))
	if err := bad.Ping(ctx); err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("wrong password: %v", err)
	}
}
