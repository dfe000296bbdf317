package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kaas/broker/brokertest"
)

// TestServeDataDirLock: while a broker runs on a data directory, a second
// `kaas serve` on it exits 1 naming the first one's pid, and `kaas users
// add` refuses without writing the users file. Once the broker is killed
// (SIGKILL: the kernel drops the lock with the process) both work.
func TestServeDataDirLock(t *testing.T) {
	dir := t.TempDir()
	p := brokertest.Serve(t, dir)
	pid := "process " + strconv.Itoa(p.Pid())

	out, code := brokertest.ServeExpectingFailure(t, dir, 60*time.Second)
	if code != 1 || !strings.Contains(out, "in use by "+pid) {
		t.Fatalf("second kaas serve on %s exited %d, want 1 naming %s:\n%s", dir, code, pid, out)
	}
	addUser := func() (string, int) {
		cmd := exec.Command(brokertest.Binary(t), "users", "add", "--data", dir, "--user", "admin", "--password-stdin")
		cmd.Stdin = strings.NewReader("s3cret\n")
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	before := listFiles(t, dir)
	if out, code := addUser(); code != 1 || !strings.Contains(out, "in use by "+pid) {
		t.Fatalf("users add under a running broker exited %d, want 1 naming %s:\n%s", code, pid, out)
	}
	if after := listFiles(t, dir); after != before {
		t.Fatalf("users add under a running broker changed the data directory:\nbefore %s\nafter  %s", before, after)
	}

	p.Kill()
	if out, code := addUser(); code != 0 {
		t.Fatalf("users add after the broker died exited %d:\n%s", code, out)
	}
	brokertest.Serve(t, dir)
}

// listFiles names every file under dir with its size and modification
// time, one string to compare.
func listFiles(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(path + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
