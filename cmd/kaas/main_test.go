package main

import (
	"flag"
	"regexp"
	"strings"
	"testing"

	"kaas/broker"
	"kaas/broker/brokertest"
)

// TestMain builds the kaas binary once (brokertest.Binary) for the
// subprocess tests and fails the package if a test leaks goroutines.
func TestMain(m *testing.M) { brokertest.Main(m) }

// TestServeHelpExplainsEveryFlag: `kaas serve --help` exits 0 and prints
// every flag the command defines with its explanation.
func TestServeHelpExplainsEveryFlag(t *testing.T) {
	out, code := brokertest.Run(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("kaas serve --help exited %d:\n%s", code, out)
	}
	cfg := broker.DefaultConfig()
	fs, _ := serveFlags(&cfg)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		_, usage := flag.UnquoteUsage(f)
		if usage == "" {
			t.Errorf("flag --%s has no explanation", f.Name)
		}
		if !strings.Contains(out, "-"+f.Name+" ") && !strings.Contains(out, "-"+f.Name+"\n") {
			t.Errorf("--help does not list --%s", f.Name)
		}
		if !strings.Contains(out, usage) {
			t.Errorf("--help does not explain --%s (%q)", f.Name, usage)
		}
	})
	if n < 15 {
		t.Fatalf("only %d serve flags", n)
	}
	for _, want := range []string{"SIGTERM", "listening on ADDR"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
}

// TestCommandLine: top-level and every subcommand's help, version, and
// usage errors (exit 2).
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // regexp on the output
	}{
		{[]string{"--help"}, 0, `(?s)serve.*bench.*inspect.*users.*version`},
		{[]string{"help"}, 0, `kaas COMMAND --help`},
		{[]string{"version"}, 0, `^kaas \S+\n$`},
		{[]string{"--version"}, 0, `^kaas \S+\n$`},
		{[]string{"version", "--help"}, 0, `Usage: kaas version`},
		{[]string{"bench", "--help"}, 0, `(?s)Usage: kaas bench.*Flags:`},
		{[]string{"inspect", "--help"}, 0, `(?s)Usage: kaas inspect.*Flags:`},
		{[]string{"users", "--help"}, 0, `(?s)Usage: kaas users add.*-password-stdin`},
		{[]string{"users", "add", "--help"}, 0, `(?s)Usage: kaas users add.*-password-stdin`},
		{[]string{"users"}, 2, `the only subcommand is add`},
		{[]string{"etcd", "--help"}, 0, `(?s)Usage: kaas etcd.*-data.*-listen`},
		{[]string{"etcd", "stray"}, 2, `no arguments`},
		{[]string{"version", "extra"}, 2, `no arguments`},
		{nil, 2, `Usage:`},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"serve", "--no-such-flag"}, 2, `flag provided but not defined: -no-such-flag`},
		{[]string{"serve", "--log-level", "loud"}, 2, `--log-level`},
		{[]string{"serve", "stray"}, 2, `no arguments`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, code := brokertest.Run(t, tc.args...)
			if code != tc.code || !regexp.MustCompile(tc.want).MatchString(out) {
				t.Fatalf("exit %d (want %d), output:\n%s\nwant match for %q", code, tc.code, out, tc.want)
			}
		})
	}
}
