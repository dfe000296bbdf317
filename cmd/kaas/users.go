package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"kaas/broker"
	"kaas/storage/datalock"
)

const usersUsage = `Usage: kaas users add --data DIR --user NAME [--mechanism SCRAM-SHA-256] --password-stdin

Stores a SCRAM credential (salt, iterations, StoredKey, ServerKey; never
the password) in the data directory, to create the first user before the
broker runs — typically a super user (--super-users User:NAME) who then
manages the others over the wire (kafka-configs.sh --alter --add-config
'SCRAM-SHA-256=[password=...]', or kadm's AlterUserSCRAMs). Run it with
no broker running on DIR: it refuses while a broker holds DIR's lock. The
password is read from the first line of standard input.

Flags:
`

func runUsers(args []string) error {
	if len(args) == 0 || args[0] != "add" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-help" || args[0] == "-h") {
			fmt.Print(usersUsage)
			usersFlags().PrintDefaults()
			return nil
		}
		return usageError{error: errors.New("users: the only subcommand is add (kaas users add --help)")}
	}
	fs := usersFlags()
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err, true}
	}
	get := func(name string) string { return fs.Lookup(name).Value.String() }
	if get("data") == "" || get("user") == "" {
		return usageError{error: errors.New("users add: --data and --user are required")}
	}
	if get("password-stdin") != "true" {
		return usageError{error: errors.New("users add: give the password on standard input with --password-stdin (never on the command line)")}
	}
	password, err := readPassword(os.Stdin)
	if err != nil {
		return err
	}
	var iterations int
	fmt.Sscan(get("iterations"), &iterations)
	// A running broker would not see the new user and would overwrite
	// the users file with its own next change: refuse while one holds
	// the directory, and keep a broker from starting meanwhile.
	lock, err := datalock.Acquire(get("data"))
	if err != nil {
		var held *datalock.HeldError
		if errors.As(err, &held) {
			return fmt.Errorf("users add: %w; add users to a running broker over the wire (kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]', or kadm's AlterUserSCRAMs)", err)
		}
		return err
	}
	defer lock.Release()
	if err := broker.AddUser(get("data"), get("user"), get("mechanism"), password, iterations); err != nil {
		return err
	}
	fmt.Printf("stored %s credential for user %s in %s\n", get("mechanism"), get("user"), get("data"))
	return nil
}

func usersFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("users add", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usersUsage)
		fs.PrintDefaults()
	}
	fs.String("data", "", "data `directory` of the broker")
	fs.String("user", "", "user `name`")
	fs.String("mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256 or SCRAM-SHA-512 (run twice for both)")
	fs.Int("iterations", 4096, "PBKDF2 iterations, 4096–16384")
	fs.Bool("password-stdin", false, "read the password from standard input (required)")
	return fs
}

// readPassword reads the first line of r, without its line ending.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("users add: no password on standard input")
	}
	return line, nil
}
